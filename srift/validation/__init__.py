"""Validation of Srift's predictions against real DDP training on the emulated testbed (`srift validate`)."""
