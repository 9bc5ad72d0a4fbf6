import os, pytest

def pytest_addoption(parser):
    parser.addoption('--slow', action='store_true', default=False,
                     help='also run slow checks (notebook cells flagged #| slow, full learning runs)')

def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: long check, only with --slow')

def pytest_collection_modifyitems(config, items):
    if config.getoption('--slow'): return
    skip = pytest.mark.skip(reason='slow: run with --slow')
    for it in items:
        if 'slow' in it.keywords: it.add_marker(skip)
