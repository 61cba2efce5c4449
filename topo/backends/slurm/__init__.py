"""The slurm backend: one topology inside a Slurm allocation, one topo agent per node.

Inside an allocation (``SLURM_JOB_ID`` set: an ``sbatch`` script, an ``salloc`` shell)
``topo run FILE -b slurm`` reads the job's nodes (``allocation``), places the
executables on them (``placement``: colocation, spread, node features as labels), and
starts one agent per node as an ``srun`` step of the job (``agents``: the remote core's
stream agent over the step's pipes); the rest is the remote core's
(``topo.backends.remote``), as on ssh. ``options`` (the backend's command-line options)
and the plan's modules (what ``topo plan -b slurm`` would submit) import nothing of a
run, so ``topo plan`` works on any machine.
"""
