"""Events the evaluations app announces; receivers connect in AppConfig.ready() so this app imports no app above it."""

from django.dispatch import Signal

# Sent after commit with `run=` each JobRun that reached a final state.
job_finished = Signal()
# Sent after commit with `evaluation=` each EvalRun that got its verdict.
eval_finished = Signal()
# Sent after commit with `artifact=` when an inspection of its files finished (passed or refused).
artifact_inspected = Signal()
