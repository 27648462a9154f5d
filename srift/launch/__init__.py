"""From a plan to a running job: launch files (torchrun, SkyPilot, Kubernetes) and the training-script helper.

`layout` turns a stored plan document into nodes, ranks and per-rank batches; `network` turns the network
assumption the plan was priced under into the NCCL settings that make the run match it; the emitters render
both; `helper` is what a user's training script imports (torch, httpx and the standard library only).
Nothing here touches the database or HTTP servers: services hand in the plan document.
"""
