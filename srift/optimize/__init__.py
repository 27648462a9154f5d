"""The optimizer (Srift §4.4–4.5): search space, exhaustive and eager search, baselines, Pareto front."""

from srift.optimize.evaluate import Evaluator, SimEvaluator
from srift.optimize.solver import PlanInfeasible, SolveOptions, optimize
from srift.optimize.space import BatchPolicy, Candidate, Problem, build_candidates

__all__ = [
    "BatchPolicy",
    "Candidate",
    "Evaluator",
    "PlanInfeasible",
    "Problem",
    "SimEvaluator",
    "SolveOptions",
    "build_candidates",
    "optimize",
]
