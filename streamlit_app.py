"""SpindleFlow RL in the browser (the Hugging Face Space app). First screen: the shipped trained policy against every
baseline over many episodes (the committed evaluation, huggingface_blog/figures/eval.md). Below it: pick a task from the
bank or type one (decomposed by the project's decomposer), pick or upload a roster, and watch the shipped policy's plan
step by step next to the best scripted baselines: the delegation DAG, the calls and why they were allowed, the reward
terms, cost and latency.
Simulated backend, no network.   Run:  pip install -e ".[app]" && streamlit run streamlit_app.py"""

from __future__ import annotations
import base64, csv, io, os, re
from pathlib import Path

os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_OFFLINE', '1')
os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')
os.environ.setdefault('MPLBACKEND', 'Agg')
import numpy as np
import yaml

TITLE = 'SpindleFlow RL: a learned orchestrator of LLM specialists'
# the committed evaluation of the shipped policy against every baseline (the README's table; the blog's figures):
# `python huggingface_blog/make_figures.py` writes it
EVAL_MD = Path(__file__).resolve().parent / 'huggingface_blog' / 'figures' / 'eval.md'


def parse_roster(name: str, data: bytes, known, max_n: int) -> list[str]:
    """Specialist ids from an uploaded roster file: YAML (a list of ids, or `roster:` / `specialists:` with ids or
    entries with `id`), CSV (an `id` column, else the first column) or plain text (one id a line). Raises ValueError
    naming unknown ids or a roster that is too long."""
    text = data.decode('utf-8-sig').strip()
    if not text:
        raise ValueError(f"{name}: the file is empty; list specialist ids, one a line.")
    low = name.lower()
    if low.endswith(('.yaml', '.yml', '.json')):
        d = yaml.safe_load(text)
        if isinstance(d, dict):
            d = d.get('roster', d.get('specialists'))
        if not isinstance(d, list):
            raise ValueError(f"{name}: expected a list of ids (or `roster:` with one).")
        ids = [x['id'] if isinstance(x, dict) else x for x in d]
    elif low.endswith('.csv'):
        rows = list(csv.reader(io.StringIO(text)))
        col = rows[0].index('id') if 'id' in rows[0] else 0
        ids = [r[col] for r in rows[1 if 'id' in rows[0] else 0 :] if r]
    else:
        ids = [l.split('#')[0] for l in text.splitlines()]
    ids = [str(x).strip() for x in ids if str(x).strip()]
    unknown = [x for x in ids if x not in known]
    if unknown:
        raise ValueError(
            f"{name}: unknown specialist id(s) {unknown}; use ids of the catalog (see the list in the sidebar)."
        )
    if len(set(ids)) != len(ids):
        raise ValueError(f"{name}: an id appears twice.")
    if not 1 <= len(ids) <= max_n:
        raise ValueError(f"{name}: a roster has 1 to {max_n} specialists, got {len(ids)}.")
    return ids


SPLIT_NAMES = {'heldout': 'held-out tasks', 'unseen-roster': 'unseen roster', 'train': 'training tasks'}
_NUM = r'[-+]?\d+(?:\.\d+)?'


def parse_eval_md(text: str) -> dict:
    """The tables of an evaluation's markdown (`spindleflow-eval`'s eval.md, chapter 10's `markdown_table`):
    {split: {'episodes': n, 'paired': the policy-vs-best-baseline line or '', 'table': {policy: {'return', 'return_ci95',
    'normalised', 'normalised_ci95': (lo, hi), 'cost_usd'}}}}. Raises ValueError when the text holds no such table."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r'### (\S+) \((\d+) episodes per policy\)', line)
        if m:
            cur = out[m[1]] = {'episodes': int(m[2]), 'paired': '', 'table': {}}
            continue
        if cur is None:
            continue
        m = re.match(
            rf'\| ([\w.+-]+) \| ({_NUM}) ± ({_NUM}) \| ({_NUM}) \[({_NUM}), ({_NUM})\] \| {_NUM} \| ({_NUM}) \|',
            line,
        )  # policy | return ± ci | normalised [lo, hi] | quality | cost
        if m:
            cur['table'][m[1]] = {
                'return': float(m[2]),
                'return_ci95': float(m[3]),
                'normalised': float(m[4]),
                'normalised_ci95': (float(m[5]), float(m[6])),
                'cost_usd': float(m[7]),
            }
        elif line.startswith('**Policy vs the best baseline'):
            cur['paired'] = line
    if not any(v['table'] for v in out.values()):
        raise ValueError(
            "no evaluation table in the text: expected '### split (N episodes per policy)', then '| policy | ...' rows"
        )
    return out


def comparison_png(ev: dict) -> bytes:
    """One panel per split: each policy's normalised score (random 0, oracle 1) with its 95% interval, best on top, in
    the colours every figure gives these names (`POLICY_COLOURS`: the trained policy red, the oracle black)."""
    from matplotlib.figure import Figure
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from spindleflow_rl.commands.evaluate import policy_colours

    splits = [s for s, v in ev.items() if 'policy' in v['table']]
    n = max(len(ev[s]['table']) for s in splits)
    fig = Figure(figsize=(5.2 * len(splits), 0.32 * n + 1.4))
    FigureCanvasAgg(fig)
    for k, s in enumerate(splits):
        tab = ev[s]['table']
        ax = fig.add_subplot(1, len(splits), k + 1)
        col = policy_colours(list(tab))
        names = sorted(tab, key=lambda p: tab[p]['normalised'])
        v = np.array([tab[p]['normalised'] for p in names])
        ci = np.array([tab[p]['normalised_ci95'] for p in names]).T
        ax.barh(range(len(names)), v, xerr=np.abs(ci - v), capsize=2, color=[col[p] for p in names])
        ax.set_yticks(
            range(len(names)), ['trained policy' if p == 'policy' else p for p in names], fontsize=8
        )
        for lab in ax.get_yticklabels():
            lab.set_fontweight('bold' if lab.get_text() == 'trained policy' else 'normal')
        for y, (x, hi) in enumerate(zip(v, ci[1])):
            ax.text(max(x, hi, 0) + 0.03, y, f'{x:.2f}', va='center', fontsize=7)
        ax.set_xlim(
            min(0, ci[0].min()) - 0.05, max(1, ci[1].max()) + 0.2
        )  # room for the numbers right of the bars
        ax.axvline(0, color='black', lw=0.8)
        ax.axvline(1, color='black', lw=0.8, ls='--')
        ax.set_xlabel('normalised score, 95% CI (random 0, oracle 1)', fontsize=8)
        ax.tick_params(axis='x', labelsize=8)
        ax.set_title(f"{SPLIT_NAMES.get(s, s)} ({ev[s]['episodes']} episodes each)", fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=100)
    return buf.getvalue()


def comparison_headline(ev: dict) -> str:
    """One line per split: the trained policy's normalised score, the best scripted baseline's, and their paired
    difference with its 95% interval (from the evaluation's own paired line): level when the interval holds 0."""
    out = []
    for s, v in ev.items():
        tab = v['table']
        if 'policy' not in tab:
            continue
        best = max(
            (p for p in tab if p not in ('policy', 'oracle', 'random')), key=lambda p: tab[p]['normalised']
        )
        line = (
            f"- **{SPLIT_NAMES.get(s, s)}**: trained policy **{tab['policy']['normalised']:.2f}**, "
            f"best scripted baseline {best} {tab[best]['normalised']:.2f}"
        )
        m = re.search(
            rf'policy − ([\w.+-]+): .* return, ({_NUM}) \[({_NUM}), ({_NUM})\] normalised', v['paired']
        )
        if m:
            lo, hi = float(m[3]), float(m[4])
            verdict = 'level (the interval holds 0)' if lo <= 0 <= hi else 'ahead' if lo > 0 else 'behind'
            line += (
                f"; paired on the same {v['episodes']} episodes, policy − {m[1]} = {m[2]} [{m[3]}, {m[4]}] "
                f"normalised: **{verdict}**"
            )
        out.append(line)
    return '\n'.join(out)


def show_comparison(st):
    "The first screen: the shipped policy against every baseline over many episodes, from the committed evaluation."
    st.header('The shipped policy against the baselines')
    if not EVAL_MD.exists():
        st.info(
            f"The committed evaluation ({EVAL_MD.name}) is not next to this app: "
            "`python huggingface_blog/make_figures.py` writes it."
        )
        return
    text = EVAL_MD.read_text()
    ev = parse_eval_md(text)
    n = max(v['episodes'] for v in ev.values())
    st.markdown(
        f"Every policy plays the same **{n} episodes** per split (held-out tasks; an unseen roster of specialists), "
        "simulated backend. Normalised score: 0 = a random policy, 1 = the oracle, which knows each episode's hidden "
        "parameters.\n\n" + comparison_headline(ev)
    )
    st.image(st.cache_data(comparison_png, show_spinner=False)(ev), width='stretch')
    with st.expander('The full table (return, cost, latency, success, ... per policy)'):
        st.markdown(text)
    st.caption(
        f"From `huggingface_blog/figures/{EVAL_MD.name}`: `spindleflow-eval` of the shipped policy (the README's "
        "table), regenerated by `python huggingface_blog/make_figures.py`."
    )


def baseline_policies() -> dict:
    "The strongest scripted baselines this version has (the planners when present, else greedy top-k)."
    import spindleflow_rl.agent.policies as b

    out = {}
    if hasattr(b, 'SubtaskPlannerPolicy'):
        out['subtask-planner'] = b.SubtaskPlannerPolicy()
    if hasattr(b, 'AdaptivePlannerPolicy'):
        out['adaptive-planner'] = b.AdaptivePlannerPolicy()
    out['greedy-topk-seq'] = b.GreedyTopKPolicy(None, 'sequential')
    out['greedy-topk-par'] = b.GreedyTopKPolicy(None, 'parallel')
    return out


def load_resources():
    "World (embedded catalog and tasks), the shipped policy and an environment of its shape (or the reason it cannot run)."
    from spindleflow_rl.core.world import default_world
    from spindleflow_rl.envs.env import SpindleFlowEnv
    from spindleflow_rl.agent.runs import DEMO_POLICY
    from spindleflow_rl.commands.export import load_policy, policy_env
    from spindleflow_rl.core.config import ConfigError
    from spindleflow_rl.core.embeddings import get_embedder

    world = default_world()
    try:
        model, cfg = load_policy(DEMO_POLICY)
        env_cfg = policy_env(model, cfg, world).cfg
        err = None
    except ConfigError as e:
        model, env_cfg, err = None, SpindleFlowEnv(world=world).cfg, str(e)
    return world, model, env_cfg, err, get_embedder()


def play_all(world, model, env_cfg, task, roster, seed: int) -> dict:
    "Record the trained policy and every baseline on the same task, roster and seed: {name: spindleflow-episode/1 record}."
    from spindleflow_rl.envs.env import SpindleFlowEnv
    from spindleflow_rl.agent.replay import record_episode
    from spindleflow_rl.agent.policies import ModelPolicy

    opts = {'task': task} if roster is None else {'task': task, 'roster': roster}
    pols = (
        {'trained policy': ModelPolicy(model, 'trained policy')} if model is not None else {}
    ) | baseline_policies()
    return {
        n: record_episode(SpindleFlowEnv(env_cfg, world=world), p, seed, options=opts, name=n)
        for n, p in pols.items()
    }


def summary_table(eps: dict) -> str:
    rows = [
        '| policy | return | quality | baseline | cost (USD) | latency (s) | specialists | path |',
        '|---|---|---|---|---|---|---|---|',
    ]
    for n, e in eps.items():
        s = e['summary']
        rows.append(
            f"| {n} | {s['return']:+.3f} | {s['specialist_score']:.3f} | {s['baseline_score']:.3f} | {s['cost_usd']:.4f} | "
            f"{s['latency_s']:.1f} | {s['n_called']} | `{s['path']}` |"
        )
    return '\n'.join(rows)


def step_markdown(ep: dict, t: int) -> str:
    "The calls of step `t` (who, mode, status, why allowed), refusals, reward terms and running totals, as markdown."
    st = ep['steps'][t - 1]
    out = []
    if st['meta'] == 'stop':
        out.append(f"**Step {t}: STOP** (the orchestrator ends the episode)")
    else:
        out.append(f"**Step {t}: {st.get('mode', '?')}**")
        rows = [
            '| slot | specialist | status | latency (s) | cost (USD) | why allowed |',
            '|---|---|---|---|---|---|',
        ]
        for c in st.get('calls') or []:
            status = c['status'] + (
                f" → fallback {c['fallback_id']}" if c.get('recovered') and c.get('fallback_id') else ''
            )
            rows.append(
                f"| {c['slot']} | `{c['specialist_id']}` | {status} | {c['latency_s']:.1f} | {c['cost_usd']:.4f} | "
                f"{(st.get('allowed') or {}).get(str(c['slot']), '')} |"
            )
        out.append('\n'.join(rows))
        for r in st.get('rejected') or []:
            out.append(f"- refused slot {r['slot']} (`{r['specialist_id']}`): {r['reason']}")
    terms = (
        ', '.join(f"{k.replace('_', ' ')} {v:+.3f}" for k, v in st['reward_terms'].items() if abs(v) >= 5e-4)
        or 'none'
    )
    out.append(
        f"Reward {st['reward']:+.3f} ({terms}). So far: cost ${st['cost_usd']:.4f}, latency {st['latency_s']:.1f}s."
    )
    return '\n\n'.join(out)


def plan_markdown(ep: dict) -> str:
    "The whole plan, one row per call: step, mode, specialist, how the call ended, why it was allowed."
    rows = ['| step | mode | specialist | status | why allowed |', '|---|---|---|---|---|']
    for st in ep['steps']:
        for c in st.get('calls') or []:
            rows.append(
                f"| {st['step']} | {st['mode']} | `{c['specialist_id']}` | {c['status']} | "
                f"{(st.get('allowed') or {}).get(str(c['slot']), '')} |"
            )
    if len(rows) == 2:
        return '*No specialist called: the orchestrator stopped at once (the generalist answers alone).*'
    return '\n'.join(rows) + f"\n\nthen STOP at step {len(ep['steps'])}" * (ep['steps'][-1]['meta'] == 'stop')


def show_episode(st, name: str, ep: dict, key: str):
    from spindleflow_rl.envs.render import dag_png, reward_png

    s = ep['summary']
    T = len(ep['steps'])
    st.subheader(name)
    st.caption(
        f"return {s['return']:+.3f} · quality {s['specialist_score']:.3f} vs baseline {s['baseline_score']:.3f} · "
        f"cost ${s['cost_usd']:.4f} · latency {s['latency_s']:.1f}s · {s['n_called']} specialist(s)"
    )
    st.markdown(plan_markdown(ep))
    t = st.slider('step', 1, T, 1, key=key) if T > 1 else 1
    st.image(base64.b64decode(dag_png(ep, t)), width='stretch')
    st.markdown(step_markdown(ep, t))
    st.image(base64.b64decode(reward_png(ep, t)), width='stretch')


def main():
    import streamlit as st

    st.set_page_config(page_title='SpindleFlow RL', layout='wide')
    st.title(TITLE)
    st.markdown(
        "An RL policy decides **which specialists to call, in which mode (sequential, parallel, debate) and when to "
        "stop**. First how the shipped trained policy compares with the scripted baselines over many episodes, then one "
        "episode of your choice step by step, on the simulated backend (no network, no API key)."
    )
    show_comparison(st)
    st.header('One episode, step by step')
    st.markdown(
        "Pick a task, a roster and a seed in the sidebar: the trained policy and the strongest baselines play **the same "
        "episode**. One episode is one draw (a policy can score 0 on a seed where it wins on average); the comparison "
        "above is the average."
    )
    world, model, env_cfg, err, embedder = st.cache_resource(
        load_resources, show_spinner='Embedding the catalog and tasks...'
    )()
    if err:
        st.error(
            f"The shipped policy cannot run on this version of the environment, so only the baselines are shown: {err}"
        )
    M, cat, bank = env_cfg.max_specialists, world.catalog, world.bank
    sb = st.sidebar
    src = sb.radio('Task', ['From the task bank', 'Type a task'], key='task_source')
    if src == 'From the task bank':
        ids = bank.ids
        tid = sb.selectbox(
            'Bank task', ids, index=0, key='task_id', format_func=lambda i: f"{i}: {bank[i].text[:60]}"
        )
        task = bank[tid]
    else:
        text = sb.text_area(
            'Your task',
            'Design a Postgres schema for invoices, then build a REST API for it and write its docs',
            key='task_text',
        )
        from spindleflow_rl.core.tasks import TaskDecomposer
        from spindleflow_rl.core.config import ConfigError

        try:
            task = TaskDecomposer(cat, embedder).decompose(text)
        except ConfigError as e:
            st.error(str(e))
            st.stop()
        if task.id not in world.sub_emb:
            world.add_task(task, embedder)
    rmode = sb.radio(
        'Roster', ['Drawn for the task', 'Pick specialists', 'Upload a roster file'], key='roster_mode'
    )
    roster = None
    if rmode == 'Pick specialists':
        roster = (
            sb.multiselect(
                f'Specialists (1 to {M})', cat.ids, default=cat.ids[:3], max_selections=M, key='roster_pick'
            )
            or None
        )
        if roster is None:
            st.warning('Pick at least one specialist.')
            st.stop()
    elif rmode == 'Upload a roster file':
        f = sb.file_uploader(
            'YAML, CSV or text file of specialist ids', type=['yaml', 'yml', 'csv', 'txt'], key='roster_file'
        )
        if f is not None:
            try:
                roster = parse_roster(f.name, f.getvalue(), cat, M)
            except ValueError as e:
                st.error(str(e))
                st.stop()
    seed = int(sb.number_input('Seed', 0, 10_000, 0, key='seed'))
    with sb.expander('Catalog ids'):
        st.markdown(', '.join(f'`{i}`' for i in cat.ids))
    st.markdown(f"**Task** `{task.id}` (phase {task.phase}): {task.text}")
    st.markdown(
        '**Subtasks**: '
        + '; '.join(
            f"{j}. {s.text} *({s.domain}" + (f", after {s.depends_on}" if s.depends_on else '') + ')*'
            for j, s in enumerate(task.subtasks)
        )
    )
    eps = play_all(world, model, env_cfg, task, roster, seed)
    ep0 = next(iter(eps.values()))
    st.markdown('**Roster**: ' + ', '.join(f"[{s}] `{r}`" for s, r in enumerate(ep0['roster']) if r))
    st.markdown(summary_table(eps))
    base = sorted((n for n in eps if n != 'trained policy'), key=lambda n: -eps[n]['summary']['return'])[:2]
    shown = (['trained policy'] if 'trained policy' in eps else []) + base
    # one full-width tab per policy: side-by-side columns squeezed the plan tables until they ran into each other
    labels = [n if n != 'trained policy' else 'Trained policy' for n in shown]
    for tab, n, label in zip(st.tabs(labels), shown, labels):
        with tab:
            show_episode(st, label, eps[n], key=f'step_{n}')


if __name__ == '__main__':
    main()
