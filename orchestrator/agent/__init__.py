"""Agent harnesses: a model (or a built-in agent) solves a problem through tools.

    run.py       `python -m orchestrator run`: plan episodes, resume, progress, summary
    rescore.py   `python -m orchestrator rescore RUN`: score final artifacts again
    harness.py   one episode: prompt -> turns -> tools -> submit -> scoring -> record
    client.py    OpenAI-compatible chat client, retries, token usage, error translation
    builtin.py   oracle, oracle:tools and replay:DIR agents
    tools.py     the eight tools (JSON-schema specs and implementations)
    probe.py     the helper the tools run inside the episode's sandbox
    prompts.py   the problem statement and the harness instructions
    accounting.py  tokens, cost, limits
    records.py   results/<run>/ layout, atomic records, crash repair
"""
