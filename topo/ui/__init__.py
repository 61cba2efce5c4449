"""The web dashboard of a run (``topo ui RUN``, ``topo run --ui``).

A process of its own that reads the run directory (``status.json``, ``program.json``,
``events.jsonl``, ``logs/``, ``metrics/``) and is a client of the run's control channel
for its actions (stop, restart a node, snapshot); it never reaches the supervisor's
internals, so the launcher pays nothing for an open page. The standard library's HTTP
server serves one page (``static/``: hand-written HTML, CSS and JavaScript, no build
step, nothing fetched from elsewhere) and a JSON API, with Server-Sent Events for the
live state; the graph is topo's own drawing of the IR (``topo.render``, as ``topo graph``).
"""
