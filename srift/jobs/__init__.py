"""Probe and profile jobs: the queue (jobs table), the worker, and where jobs run (local, testbed, EC2)."""
