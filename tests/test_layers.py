"""Layers without cycles. Every import in the package, including the ones made inside functions (they hide a cycle
from Python, not from a reader) and `importlib.import_module('spindleflow_rl....')` calls, must point to a module of
a lower layer of `LAYERS`. A module never imports one of its own layer or one above it, so there is no cycle, and the
commands at the top share only what lies below them. The checker itself is tested on a synthetic graph and on a copy
of the package with an upward import injected."""

import ast, shutil
from pathlib import Path
import pytest

PKG = Path(__file__).resolve().parent.parent / 'spindleflow_rl'

LAYERS = [  # top first: a module may import modules of the layers listed after its own, never its own or earlier ones
    (
        'command line',
        'every spindleflow-* command: parsers generated from the dataclasses, exit codes, train-then-evaluate',
        {'cli'},
    ),
    (
        'workflows',
        'commands that train a policy and then evaluate it: they compose the two layers below',
        {'demo', 'sweep', 'transfer'},
    ),
    (
        'log runs',
        'a run on a recorded log with the full-information learner (18c): it trains (18b) and reports against the '
        'routers',
        {'log_runs'},
    ),
    (
        'training',
        '`spindleflow-train`\'s loop: the curriculum, callbacks and training, and learning from every logged outcome '
        '(18b); the command layer evaluates a run afterwards',
        {'train', 'logs_learning'},
    ),
    (
        'commands',
        'what reads or serves a trained policy, and the warm start of training; siblings, none imports another',
        {'evaluate', 'audit', 'export', 'openenv', 'imitation', 'multi_model_log'},
    ),
    (
        'logs',
        'learning from logs: routers, the log-fitted teacher and the cost sweep, used by evaluation and the warm start',
        {'routers'},
    ),
    (
        'runs',
        'what every command builds a run from: config, world, backend, environments, checkpoints',
        {'runs'},
    ),
    (
        'checkpoints',
        'finding and loading checkpoints safely (named errors, fallback, signed resume states)',
        {'checkpoints'},
    ),
    ('records', 'the episode file format and its viewers', {'replay'}),
    (
        'policies',
        'the Policy interface and every policy; the network a trained policy is',
        {'policies', 'policy'},
    ),
    ('environment', 'SpindleFlowEnv', {'env'}),
    (
        'episode checks and pictures',
        'what the environment rewards (explanations) and how it draws an episode',
        {'explain', 'render'},
    ),
    ('sandbox', 'the LLM backend whose specialists see only their DAG ancestors', {'security'}),
    (
        'LLM backend',
        'specialists and judges through the LLM client; the scripted server the tests talk to',
        {'openai_backend', 'testing'},
    ),
    (
        'backends',
        'the backend protocol, the simulator and recorded logs; the LLM client',
        {'backends', 'llm'},
    ),
    ('fast simulator', 'appendix 93: the simulator step on plain floats', {'fast_sim'}),
    ('world', 'the catalog, the task bank and their embeddings, embedded once', {'world'}),
    (
        'problem',
        'tasks, rewards, the delegation DAG; stepping environments in threads (chapter 09a)',
        {'tasks', 'rewards', 'dag', 'concurrency'},
    ),
    ('catalog', 'the specialists', {'catalog'}),
    ('embeddings', 'the MiniLM embedder', {'embeddings'}),
    (
        'embedding cache',
        'appendix 95a: the encoder found offline, and the disk cache of embedding vectors',
        {'embedding_cache'},
    ),
    (
        'files',
        'atomic file writes, and where a command may write (output paths checked, run folders claimed)',
        {'files'},
    ),
    (
        'foundation',
        'configuration (and reading the user\'s files), and the speed appendices 90-92 that import nothing of ours',
        {'config', 'fast_sampling', 'fast_dag', 'fast_lstm'},
    ),
]
LAYER_OF = {m: i for i, (_, _, mods) in enumerate(LAYERS) for m in mods}


def module_imports(source: str, name: str = 'spindleflow_rl') -> dict:
    "`{imported module: first line}` of every import of package `name` in `source`, at any depth, relative or absolute."
    out = {}
    for node in ast.walk(ast.parse(source)):
        targets = []
        if isinstance(node, ast.ImportFrom):
            parts = (node.module or '').split('.')
            if node.level == 1:
                targets = [parts[0]] if node.module else [a.name for a in node.names]
            elif parts[0] == name:
                targets = [parts[1]] if len(parts) > 1 else [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name.split('.')[1] for a in node.names if a.name.startswith(name + '.')]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, 'attr', getattr(node.func, 'id', None)) == 'import_module'
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith(name + '.')
        ):
            targets = [str(node.args[0].value).split('.')[1]]
        for t in targets:
            out.setdefault(t, node.lineno)
    return out


def import_graph(pkg: Path = PKG) -> dict:
    "`{module: {imported module: line}}` over the package's modules (`_modidx` and `__init__` aside)."
    mods = {p.stem: p for p in pkg.glob('*.py') if not p.stem.startswith('_')}
    return {
        m: {
            t: ln
            for t, ln in module_imports(p.read_text(encoding='utf-8'), pkg.name).items()
            if t in mods and t != m
        }
        for m, p in mods.items()
    }


def cycles(graph: dict) -> list:
    "The strongly connected groups of more than one module (Tarjan), each sorted."
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def not_downward(graph: dict, layer_of: dict = LAYER_OF) -> list:
    "`(module, imported, line)` for every import that does not point to a strictly lower layer (a larger index)."
    return sorted((m, t, ln) for m, ts in graph.items() for t, ln in ts.items() if layer_of[t] <= layer_of[m])


def test_every_module_has_one_layer():
    mods = {p.stem for p in PKG.glob('*.py') if not p.stem.startswith('_')}
    named = [m for _, _, ms in LAYERS for m in ms]
    assert len(named) == len(set(named)), 'a module is in two layers'
    assert mods == set(named), (
        f"not in LAYERS: {sorted(mods - set(named))}; in LAYERS but gone: {sorted(set(named) - mods)}"
    )


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_every_import_points_down():
    bad = not_downward(import_graph())
    assert not bad, '\n'.join(
        f"{m}.py:{ln} imports {t} ({LAYERS[LAYER_OF[m]][0]} -> {LAYERS[LAYER_OF[t]][0]})" for m, t, ln in bad
    )


def test_imports_inside_functions_and_import_module_count():
    src = (
        "from .config import ConfigError\n"
        "def f():\n    from spindleflow_rl.train import train\n    import spindleflow_rl.runs as r\n"
        "def g():\n    import importlib; return importlib.import_module('spindleflow_rl.evaluate')\n"
        "from spindleflow_rl import llm\nimport numpy, json\n"
    )
    assert module_imports(src) == {'config': 1, 'train': 3, 'runs': 4, 'evaluate': 6, 'llm': 7}


def test_checker_on_a_synthetic_graph():
    g = {'top': {'mid': 1}, 'mid': {'low': 2}, 'low': {}}
    layers = {'top': 0, 'mid': 1, 'low': 2}
    assert cycles(g) == [] and not_downward(g, layers) == []
    g['low'] = {'top': 9}  # an upward import closes a cycle
    assert cycles(g) == [['low', 'mid', 'top']] and not_downward(g, layers) == [('low', 'top', 9)]
    assert not_downward({'a': {'b': 3}, 'b': {}}, {'a': 1, 'b': 1}) == [
        ('a', 'b', 3)
    ]  # a sibling import is refused too


def test_an_injected_upward_import_is_caught(tmp_path):
    "A copy of the package whose world module imports training inside a function: both checks fail, naming the line."
    pkg = tmp_path / 'spindleflow_rl'
    shutil.copytree(PKG, pkg, ignore=shutil.ignore_patterns('__pycache__', 'assets', 'configs'))
    world = pkg / 'world.py'
    n = len(world.read_text().splitlines())
    world.write_text(
        world.read_text() + "\ndef _late():\n    from spindleflow_rl.train import train\n    return train\n"
    )
    g = import_graph(pkg)
    assert ('world', 'train', n + 3) in not_downward(g)
    assert any({'world', 'train'} <= set(c) for c in cycles(g))
