"""Run every notebook in nbs/ (the literate tests live there) with nbdev's own runner, one pytest test each."""
import os
from pathlib import Path
import pytest
from nbdev import test as nbdev_test   # (imported as a module so pytest does not collect nbdev's test_nb)

NBS = Path(__file__).resolve().parent.parent/'nbs'
NOTEBOOKS = sorted(p for p in NBS.glob('*.ipynb') if not p.name.startswith('_'))

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook(nb, request):
    force = ['slow'] if request.config.getoption('--slow') else []
    ok, secs = nbdev_test.test_nb(nb, skip_flags=['slow', 'llm'], force_flags=force, do_print=False, basepath=NBS)
    assert ok, f'{nb.name} failed (see the traceback above)'
