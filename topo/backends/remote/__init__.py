"""The remote core: what every backend that runs executables on other hosts shares.

ssh, ray (and Slurm, which reaches a host with an ``srun`` step inside an allocation
and places by the allocation's nodes) each start one topo agent per host, hand it the
run and then each executable with its grant, hear what happened, relay output and
notice a lost host -- the same way. What is a backend's own is only how it reaches a
host and how it places:

* **transport** (``transport.Transport``): start an agent on a host and carry the
  launcher's requests to it (an SSH channel running ``stream``; a Ray actor; an
  ``srun`` step running ``stream``), and report back (``transport.Reports``): the
  agent's messages and log lines, its end (its process ended, the host is fine) or the
  host's loss (a lease that ran out, a node Ray declared dead);
* **placement**: which host an attempt goes to (an inventory; a placement group's
  node; an allocation's node), handed to the fleet (``Fleet.send``) -- at once, or once
  known (``Fleet.hold``).

The rest is here, in two halves that share only ``follow``:

* the host's side: ``host.HostCore`` -- topo's fork server started with the run
  (``topo.backends.forkserver``, as the procs backend's), each spawn handed over with
  its grant (``grant_pipe``: the agent keeps none), the fork server's reports relayed,
  the executables' logs followed (``follow``), kill (before or after the fork) and stack
  dumps, and the end of everything; ``stream`` is the agent over a byte stream (JSON
  lines, a lease, a heartbeat: when the launcher or its link is lost, the agent ends
  all it started);
* the launcher's side: ``fleet.Fleet`` -- one agent per host at a time, the runners of
  attempts by (executable, attempt) (``records``), attempts waiting for their place or
  for their host's next agent, grants, each attempt's start and end (with how it ended)
  and a lost agent or host reported to the ``Sink`` with the reason, agents replaced
  (and a host given up whose agents keep dying), and output appended into the run
  directory across program changes (``output``).

A new remote backend is a ``Transport`` subclass and a placement, and nothing else.
"""
