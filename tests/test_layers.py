"""Folders and layers without cycles. The package's folders name its layer groups (`FOLDERS`, bottom of the list =
bottom of the stack; appendix 99 draws them); inside a folder, modules sit on the layers of `LAYERS`. Every import in
the package, including the ones made inside functions (they hide a cycle from Python, not from a reader) and
`importlib.import_module('spindleflow_rl....')` calls, must point to a module of a lower layer, and so to the same
folder or a folder below. A module never imports one of its own layer or one above it, so there is no cycle, and the
commands at the top share only what lies below them. The checker itself is tested on synthetic sources and graphs and
on a copy of the package with an upward import injected."""

import ast, shutil
from pathlib import Path
import pytest

PKG = Path(__file__).resolve().parent.parent / 'spindleflow_rl'

FOLDERS = [  # top first; `cli` is a module at the package's root, the top of the stack
    ('cli', "every spindleflow-* command's parser, generated from the dataclasses; exit codes"),
    (
        'commands',
        'what the commands do: evaluate, audit, export, serve, and the workflows that train then evaluate',
    ),
    ('training', 'the warm start, the training loop, learning from every logged outcome, a log run'),
    ('logs', 'the log library: routers and synthetic logs'),
    ('agent', 'policies, the network, checkpoints, episode records, a run, stepping environments in threads'),
    ('envs', 'SpindleFlowEnv, the explanation checks it rewards, its pictures'),
    ('llms', 'the LLM client, the LLM backend and judges, its sandbox, the scripted server'),
    ('sim', 'the backend protocol, the simulator and its fast step, recorded logs'),
    ('core', 'configuration, files, embeddings, catalog, tasks, rewards, the DAG, the world'),
    ('fast', 'speed kernels that import nothing of ours'),
]
FOLDER_OF = {f: i for i, (f, _) in enumerate(FOLDERS)}

LAYERS = [  # top first: a module may import modules of the layers listed after its own, never its own or earlier ones
    ('command line', 'parsers generated from the dataclasses, exit codes, train-then-evaluate', {'cli'}),
    (
        'workflows',
        'commands that train a policy and then evaluate it: they compose the layers below',
        {'commands.demo', 'commands.sweep', 'commands.transfer'},
    ),
    (
        'commands',
        'what reads or serves a trained policy; siblings, none imports another',
        {'commands.evaluate', 'commands.audit', 'commands.export', 'commands.openenv'},
    ),
    (
        'log runs',
        'a run on a recorded log with the full-information learner (18c): it trains (18b) and reports against the '
        'routers',
        {'training.log_runs'},
    ),
    (
        'training',
        "`spindleflow-train`'s loop: the curriculum, callbacks and training, and learning from every logged outcome "
        '(18b)',
        {'training.train', 'training.logs_learning'},
    ),
    ('warm start', 'cloning a planner or a log-fitted teacher before PPO (08a)', {'training.imitation'}),
    ('synthetic logs', 'logs of more than two models (18a)', {'logs.multi_model_log'}),
    (
        'routers',
        'the log library: replay, the log as a table, the routers (one family), PGR and APGR, the log-fitted teacher',
        {'logs.routers'},
    ),
    (
        'runs',
        'what every command builds a run from: config, world, backend, environments, checkpoints',
        {'agent.runs'},
    ),
    (
        'checkpoints',
        'finding and loading checkpoints safely (named errors, fallback, signed resume states)',
        {'agent.checkpoints'},
    ),
    ('records', 'the episode file format and its viewers', {'agent.replay'}),
    (
        'policies',
        'the Policy interface and every policy; the network a trained policy is; stepping environments in threads',
        {'agent.policies', 'agent.network', 'agent.concurrency'},
    ),
    ('environment', 'SpindleFlowEnv', {'envs.env'}),
    (
        'episode checks and pictures',
        'what the environment rewards (explanations) and how it draws an episode',
        {'envs.explain', 'envs.render'},
    ),
    ('sandbox', 'the LLM backend whose specialists see only their DAG ancestors', {'llms.sandbox'}),
    (
        'LLM backend',
        'specialists and judges through the LLM client; the scripted server the tests talk to',
        {'llms.backend', 'llms.testing'},
    ),
    ('LLM client', 'the OpenAI client: .env, prices, cache, rate limits', {'llms.client'}),
    ('backends', 'the backend protocol, the simulator and recorded logs', {'sim.backends'}),
    ('fast simulator', 'appendix 93: the simulator step on plain floats', {'sim.fast_sim'}),
    ('world', 'the catalog, the task bank and their embeddings, embedded once', {'core.world'}),
    ('problem', 'tasks, rewards, the delegation DAG', {'core.tasks', 'core.rewards', 'core.dag'}),
    ('catalog', 'the specialists', {'core.catalog'}),
    ('embeddings', 'the MiniLM embedder', {'core.embeddings'}),
    (
        'embedding cache',
        'appendix 95a: the encoder found offline, and the disk cache of embedding vectors',
        {'core.embedding_cache'},
    ),
    (
        'files',
        'atomic file writes, and where a command may write (output paths checked, run folders claimed)',
        {'core.files'},
    ),
    ('configuration', "configuration, and reading the user's files", {'core.config'}),
    (
        'fast kernels',
        'appendices 90-92: they import nothing of ours',
        {'fast.sampling', 'fast.dag', 'fast.lstm'},
    ),
    ('old paths', "appendix 99: 0.1's module paths, imported on request by name", {'_compat'}),
]
LAYER_OF = {m: i for i, (_, _, mods) in enumerate(LAYERS) for m in mods}


def package_modules(pkg: Path = PKG) -> dict:
    "`{dotted module name relative to the package: path}` (`_modidx` and the `__init__`s aside)."
    return {
        '.'.join(p.relative_to(pkg).with_suffix('').parts): p
        for p in sorted(pkg.rglob('*.py'))
        if p.name not in ('__init__.py', '_modidx.py')
    }


def module_imports(source: str, here: str = 'x', known=None, name: str = 'spindleflow_rl') -> dict:
    """`{imported module: first line}` of every import of package `name` in `source` (the module `here`, dotted
    relative to the package), at any depth, relative or absolute; `from a import b` names `a.b` when that is a module
    of `known`, else `a`."""
    pkg_parts = here.split('.')[:-1]
    known = set(known or ())
    out = {}

    def add(parts, names, line):
        for n in names or [None]:
            t = '.'.join(parts + [n]) if n and '.'.join(parts + [n]) in known else '.'.join(parts)
            if t:
                out[t] = min(out.get(t, line), line)  # the first line, whatever the walk's order

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            mod = (node.module or '').split('.') if node.module else []
            if node.level:
                add(
                    pkg_parts[: len(pkg_parts) - node.level + 1] + mod,
                    [a.name for a in node.names],
                    node.lineno,
                )
            elif mod[0] == name:
                add(mod[1:], [a.name for a in node.names], node.lineno)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(name + '.'):
                    add(a.name.split('.')[1:], None, node.lineno)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, 'attr', getattr(node.func, 'id', None)) == 'import_module'
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith(name + '.')
        ):
            add(str(node.args[0].value).split('.')[1:], None, node.lineno)
    return out


def import_graph(pkg: Path = PKG) -> dict:
    "`{module: {imported module: line}}` over the package's modules."
    mods = package_modules(pkg)
    return {
        m: {
            t: ln
            for t, ln in module_imports(p.read_text(encoding='utf-8'), m, mods, pkg.name).items()
            if t in mods and t != m
        }
        for m, p in mods.items()
    }


def folder(module: str) -> str:
    return module.split('.')[0]


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


def test_every_module_has_one_layer_and_its_folder_is_named():
    mods = set(package_modules())
    named = [m for _, _, ms in LAYERS for m in ms]
    assert len(named) == len(set(named)), 'a module is in two layers'
    assert mods == set(named), (
        f"not in LAYERS: {sorted(mods - set(named))}; in LAYERS but gone: {sorted(set(named) - mods)}"
    )
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and any(p.glob('*.py'))}
    assert folders == {f for f, _ in FOLDERS} - {'cli'}, folders
    for f in folders:  # a folder is a package: installed by setuptools, importable as spindleflow_rl.<folder>
        assert (PKG / f / '__init__.py').exists(), f


def test_layers_keep_folders_together_bottom_up():
    "Reading LAYERS top to bottom never goes back up a folder, so an import down the layers is down the folders."
    order = [FOLDER_OF.get(folder(m), len(FOLDERS)) for _, _, ms in LAYERS for m in sorted(ms)]
    order = [o for o in order if o < len(FOLDERS)]  # `_compat` (appendix 99) is at the root, under everything
    assert order == sorted(order), [(m, folder(m)) for _, _, ms in LAYERS for m in sorted(ms)]
    assert all(len({folder(m) for m in ms}) == 1 for _, _, ms in LAYERS), 'a layer spans two folders'


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_every_import_points_down():
    bad = not_downward(import_graph())
    assert not bad, '\n'.join(
        f"{m}:{ln} imports {t} ({LAYERS[LAYER_OF[m]][0]} -> {LAYERS[LAYER_OF[t]][0]})" for m, t, ln in bad
    )


def test_imports_inside_functions_relative_and_import_module_count():
    known = {'core.config', 'core.world', 'training.train', 'agent.runs', 'commands.evaluate', 'llms.client'}
    src = (
        "from .config import ConfigError\n"
        "def f():\n    from spindleflow_rl.training.train import train\n    import spindleflow_rl.agent.runs as r\n"
        "def g():\n    import importlib; return importlib.import_module('spindleflow_rl.commands.evaluate')\n"
        "from spindleflow_rl.llms import client\nfrom ..training import train\nimport numpy, json\n"
    )
    assert module_imports(src, 'core.world', known) == {
        'core.config': 1,
        'training.train': 3,
        'agent.runs': 4,
        'commands.evaluate': 6,
        'llms.client': 7,
    }


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
    world = pkg / 'core' / 'world.py'
    n = len(world.read_text().splitlines())
    world.write_text(
        world.read_text() + "\ndef _late():\n    from ..training.train import train\n    return train\n"
    )
    g = import_graph(pkg)
    assert ('core.world', 'training.train', n + 3) in not_downward(g)
    assert any({'core.world', 'training.train'} <= set(c) for c in cycles(g))
