"""SpindleFlow RL in the browser (the Hugging Face Space app): pick a task from the bank or type one (decomposed by the
project's decomposer), pick or upload a roster, and watch the shipped trained policy's plan step by step next to the
best scripted baselines: the delegation DAG, the calls and why they were allowed, the reward terms, cost and latency.
Simulated backend, no network.   Run:  pip install -e ".[app]" && streamlit run streamlit_app.py"""
from __future__ import annotations
import base64, csv, io, os
os.environ.setdefault('HF_HUB_OFFLINE', '1'); os.environ.setdefault('TRANSFORMERS_OFFLINE', '1')
os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false'); os.environ.setdefault('MPLBACKEND', 'Agg')
import yaml

TITLE = 'SpindleFlow RL: a learned orchestrator of LLM specialists'


def parse_roster(name: str, data: bytes, known, max_n: int) -> list[str]:
    """Specialist ids from an uploaded roster file: YAML (a list of ids, or `roster:` / `specialists:` with ids or
    entries with `id`), CSV (an `id` column, else the first column) or plain text (one id a line). Raises ValueError
    naming unknown ids or a roster that is too long."""
    text = data.decode('utf-8-sig').strip()
    if not text: raise ValueError(f"{name}: the file is empty; list specialist ids, one a line.")
    low = name.lower()
    if low.endswith(('.yaml', '.yml', '.json')):
        d = yaml.safe_load(text)
        if isinstance(d, dict): d = d.get('roster', d.get('specialists'))
        if not isinstance(d, list): raise ValueError(f"{name}: expected a list of ids (or `roster:` with one).")
        ids = [x['id'] if isinstance(x, dict) else x for x in d]
    elif low.endswith('.csv'):
        rows = list(csv.reader(io.StringIO(text)))
        col = rows[0].index('id') if 'id' in rows[0] else 0
        ids = [r[col] for r in rows[1 if 'id' in rows[0] else 0:] if r]
    else: ids = [l.split('#')[0] for l in text.splitlines()]
    ids = [str(x).strip() for x in ids if str(x).strip()]
    unknown = [x for x in ids if x not in known]
    if unknown: raise ValueError(f"{name}: unknown specialist id(s) {unknown}; use ids of the catalog (see the list in the sidebar).")
    if len(set(ids)) != len(ids): raise ValueError(f"{name}: an id appears twice.")
    if not 1 <= len(ids) <= max_n: raise ValueError(f"{name}: a roster has 1 to {max_n} specialists, got {len(ids)}.")
    return ids


def baseline_policies() -> dict:
    "The strongest scripted baselines this version has (the planners when present, else greedy top-k)."
    import spindleflow_rl.policies as b
    out = {}
    if hasattr(b, 'SubtaskPlannerPolicy'): out['subtask-planner'] = b.SubtaskPlannerPolicy()
    if hasattr(b, 'AdaptivePlannerPolicy'): out['adaptive-planner'] = b.AdaptivePlannerPolicy()
    out['greedy-topk-seq'] = b.GreedyTopKPolicy(None, 'sequential')
    out['greedy-topk-par'] = b.GreedyTopKPolicy(None, 'parallel')
    return out


def load_resources():
    "World (embedded catalog and tasks), the shipped policy and an environment of its shape (or the reason it cannot run)."
    from spindleflow_rl.world import default_world
    from spindleflow_rl.env import SpindleFlowEnv
    from spindleflow_rl.runs import DEMO_POLICY
    from spindleflow_rl.export import load_policy, policy_env
    from spindleflow_rl.config import ConfigError
    from spindleflow_rl.embeddings import get_embedder
    world = default_world()
    try:
        model, cfg = load_policy(DEMO_POLICY); env_cfg = policy_env(model, cfg, world).cfg; err = None
    except ConfigError as e:
        model, env_cfg, err = None, SpindleFlowEnv(world=world).cfg, str(e)
    return world, model, env_cfg, err, get_embedder()


def play_all(world, model, env_cfg, task, roster, seed: int) -> dict:
    "Record the trained policy and every baseline on the same task, roster and seed: {name: spindleflow-episode/1 record}."
    from spindleflow_rl.env import SpindleFlowEnv
    from spindleflow_rl.replay import record_episode
    from spindleflow_rl.policies import ModelPolicy
    opts = {'task': task} if roster is None else {'task': task, 'roster': roster}
    pols = ({'trained policy': ModelPolicy(model, 'trained policy')} if model is not None else {}) | baseline_policies()
    return {n: record_episode(SpindleFlowEnv(env_cfg, world=world), p, seed, options=opts, name=n) for n, p in pols.items()}


def summary_table(eps: dict) -> str:
    rows = ['| policy | return | quality | baseline | cost (USD) | latency (s) | specialists | path |', '|---|---|---|---|---|---|---|---|']
    for n, e in eps.items():
        s = e['summary']
        rows.append(f"| {n} | {s['return']:+.3f} | {s['specialist_score']:.3f} | {s['baseline_score']:.3f} | {s['cost_usd']:.4f} | "
                    f"{s['latency_s']:.1f} | {s['n_called']} | `{s['path']}` |")
    return '\n'.join(rows)


def step_markdown(ep: dict, t: int) -> str:
    "The calls of step `t` (who, mode, status, why allowed), refusals, reward terms and running totals, as markdown."
    st = ep['steps'][t - 1]
    out = []
    if st['meta'] == 'stop': out.append(f"**Step {t}: STOP** (the orchestrator ends the episode)")
    else:
        out.append(f"**Step {t}: {st.get('mode', '?')}**")
        rows = ['| slot | specialist | status | latency (s) | cost (USD) | why allowed |', '|---|---|---|---|---|---|']
        for c in st.get('calls') or []:
            status = c['status'] + (f" → fallback {c['fallback_id']}" if c.get('recovered') and c.get('fallback_id') else '')
            rows.append(f"| {c['slot']} | `{c['specialist_id']}` | {status} | {c['latency_s']:.1f} | {c['cost_usd']:.4f} | "
                        f"{(st.get('allowed') or {}).get(str(c['slot']), '')} |")
        out.append('\n'.join(rows))
        for r in st.get('rejected') or []: out.append(f"- refused slot {r['slot']} (`{r['specialist_id']}`): {r['reason']}")
    terms = ', '.join(f"{k.replace('_', ' ')} {v:+.3f}" for k, v in st['reward_terms'].items() if abs(v) >= 5e-4) or 'none'
    out.append(f"Reward {st['reward']:+.3f} ({terms}). So far: cost ${st['cost_usd']:.4f}, latency {st['latency_s']:.1f}s.")
    return '\n\n'.join(out)


def plan_markdown(ep: dict) -> str:
    "The whole plan, one row per call: step, mode, specialist, how the call ended, why it was allowed."
    rows = ['| step | mode | specialist | status | why allowed |', '|---|---|---|---|---|']
    for st in ep['steps']:
        for c in st.get('calls') or []:
            rows.append(f"| {st['step']} | {st['mode']} | `{c['specialist_id']}` | {c['status']} | "
                        f"{(st.get('allowed') or {}).get(str(c['slot']), '')} |")
    if len(rows) == 2: return '*No specialist called: the orchestrator stopped at once (the generalist answers alone).*'
    return '\n'.join(rows) + f"\n\nthen STOP at step {len(ep['steps'])}" * (ep['steps'][-1]['meta'] == 'stop')


def show_episode(st, name: str, ep: dict, key: str):
    from spindleflow_rl.render import dag_png, reward_png
    s = ep['summary']; T = len(ep['steps'])
    st.subheader(name)
    st.caption(f"return {s['return']:+.3f} · quality {s['specialist_score']:.3f} vs baseline {s['baseline_score']:.3f} · "
               f"cost ${s['cost_usd']:.4f} · latency {s['latency_s']:.1f}s · {s['n_called']} specialist(s)")
    st.markdown(plan_markdown(ep))
    t = st.slider('step', 1, T, 1, key=key) if T > 1 else 1
    st.image(base64.b64decode(dag_png(ep, t)), width='stretch')
    st.markdown(step_markdown(ep, t))
    st.image(base64.b64decode(reward_png(ep, t)), width='stretch')


def main():
    import streamlit as st
    st.set_page_config(page_title='SpindleFlow RL', layout='wide')
    st.title(TITLE)
    st.markdown("An RL policy decides **which specialists to call, in which mode (sequential, parallel, debate) and when to "
                "stop**. Here the shipped trained policy plans a task next to the best scripted baselines, on the simulated "
                "backend (no network, no API key).")
    world, model, env_cfg, err, embedder = st.cache_resource(load_resources, show_spinner='Embedding the catalog and tasks...')()
    if err: st.error(f"The shipped policy cannot run on this version of the environment, so only the baselines are shown: {err}")
    M, cat, bank = env_cfg.max_specialists, world.catalog, world.bank
    sb = st.sidebar
    src = sb.radio('Task', ['From the task bank', 'Type a task'], key='task_source')
    if src == 'From the task bank':
        ids = bank.ids
        tid = sb.selectbox('Bank task', ids, index=0, key='task_id', format_func=lambda i: f"{i}: {bank[i].text[:60]}")
        task = bank[tid]
    else:
        text = sb.text_area('Your task', 'Design a Postgres schema for invoices, then build a REST API for it and write its docs',
                            key='task_text')
        from spindleflow_rl.tasks import TaskDecomposer
        from spindleflow_rl.config import ConfigError
        try: task = TaskDecomposer(cat, embedder).decompose(text)
        except ConfigError as e: st.error(str(e)); st.stop()
        if task.id not in world.sub_emb: world.add_task(task, embedder)
    rmode = sb.radio('Roster', ['Drawn for the task', 'Pick specialists', 'Upload a roster file'], key='roster_mode')
    roster = None
    if rmode == 'Pick specialists':
        roster = sb.multiselect(f'Specialists (1 to {M})', cat.ids, default=cat.ids[:3], max_selections=M, key='roster_pick') or None
        if roster is None: st.warning('Pick at least one specialist.'); st.stop()
    elif rmode == 'Upload a roster file':
        f = sb.file_uploader('YAML, CSV or text file of specialist ids', type=['yaml', 'yml', 'csv', 'txt'], key='roster_file')
        if f is not None:
            try: roster = parse_roster(f.name, f.getvalue(), cat, M)
            except ValueError as e: st.error(str(e)); st.stop()
    seed = int(sb.number_input('Seed', 0, 10_000, 0, key='seed'))
    with sb.expander('Catalog ids'): st.markdown(', '.join(f'`{i}`' for i in cat.ids))
    st.markdown(f"**Task** `{task.id}` (phase {task.phase}): {task.text}")
    st.markdown('**Subtasks**: ' + '; '.join(f"{j}. {s.text} *({s.domain}" + (f", after {s.depends_on}" if s.depends_on else '') + ')*'
                                          for j, s in enumerate(task.subtasks)))
    eps = play_all(world, model, env_cfg, task, roster, seed)
    ep0 = next(iter(eps.values()))
    st.markdown('**Roster**: ' + ', '.join(f"[{s}] `{r}`" for s, r in enumerate(ep0['roster']) if r))
    st.markdown(summary_table(eps))
    base = sorted((n for n in eps if n != 'trained policy'), key=lambda n: -eps[n]['summary']['return'])[:2]
    shown = (['trained policy'] if 'trained policy' in eps else []) + base
    # one full-width tab per policy: side-by-side columns squeezed the plan tables until they ran into each other
    labels = [n if n != 'trained policy' else 'Trained policy' for n in shown]
    for tab, n, label in zip(st.tabs(labels), shown, labels):
        with tab: show_episode(st, label, eps[n], key=f'step_{n}')


if __name__ == '__main__':
    main()
