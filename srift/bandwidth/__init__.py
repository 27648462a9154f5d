"""Allreduce bus bandwidth: probe samples, nccl-tests import, α-β prior, XGBoost learner, model registry."""
