"""A cluster the service submits to, and one job run (all its attempts) on it."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from governance.core.models import BaseModel

TOKEN = RegexValidator(r"^[A-Za-z0-9_.-]{1,64}$", "letters, digits, '_', '.', '-' only")
PATH = RegexValidator(r"^/[A-Za-z0-9_./-]{1,400}$", "an absolute path of letters, digits, '_', '.', '-', '/'")
PROGRAM = RegexValidator(r"^(/[A-Za-z0-9_./-]{1,400}|[A-Za-z0-9_.-]{1,64})$", "a command name or an absolute path")


def no_parent_segments(value: str) -> None:
    """`..` would climb out of the directory an operator configured (the regex allows dots)."""
    if ".." in value.split("/"):
        raise ValidationError("must not contain '..' segments")


def model_roots_valid(value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(root, str) for root in value):
        raise ValidationError("a list of absolute directory paths")
    for root in value:
        PATH(root)
        no_parent_segments(root)


class ExecutorKind(models.TextChoices):
    SLURM = "slurm", "Slurm over SSH"
    LOCAL = "local", "Local subprocess"


class Cluster(BaseModel):
    name = models.CharField(max_length=100, unique=True, validators=[TOKEN])
    executor = models.CharField(max_length=8, choices=ExecutorKind.choices, default=ExecutorKind.SLURM)
    host = models.CharField(max_length=253, blank=True)
    port = models.PositiveIntegerField(default=22, validators=[MinValueValidator(1), MaxValueValidator(65535)])
    user = models.CharField(max_length=64, blank=True, validators=[TOKEN])
    host_keys = models.TextField(blank=True, help_text="pinned host keys, known_hosts format")
    key_path = models.CharField(
        max_length=400,
        blank=True,
        validators=[PATH, no_parent_segments],
        help_text="path of the private key file on the workers (the key is never stored)",
    )
    remote_root = models.CharField(max_length=400, validators=[PATH, no_parent_segments])
    model_roots = models.JSONField(
        default=list,
        blank=True,
        validators=[model_roots_valid],
        help_text="directories on the cluster that model checkpoints may be read from; an artifact's location "
        "on this cluster must resolve inside one of them",
    )
    lm_eval_dir = models.CharField(
        max_length=400,
        blank=True,
        validators=[PATH, no_parent_segments],
        help_text="directory on the cluster with lm-eval task YAMLs and their data (offline); blank: no standard tasks",
    )
    partition = models.CharField(max_length=64, blank=True, validators=[TOKEN])
    account = models.CharField(max_length=64, blank=True, validators=[TOKEN])
    qos = models.CharField(max_length=64, blank=True, validators=[TOKEN])
    gres_pattern = models.CharField(max_length=64, blank=True, help_text="e.g. gpu:h200:{gpus}")
    default_time_limit_s = models.PositiveIntegerField(default=3600)
    setup_lines = models.TextField(blank=True, help_text="shell lines run before the payload (module load …)")
    python = models.CharField(
        max_length=400,
        default="python3",
        validators=[PROGRAM],
        help_text="the interpreter that runs the payloads (one with planner/ importable)",
    )
    last_test_at = models.DateTimeField(null=True, blank=True)
    last_test_ok = models.BooleanField(null=True)
    last_test_message = models.TextField(blank=True)
    inventory = models.JSONField(null=True, blank=True, help_text="nodes and GPUs found by the discovery job")
    discovered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class JobRunState(models.TextChoices):
    QUEUED = "queued"
    SUBMITTING = "submitting"
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    LOST = "lost"


ACTIVE_STATES = (JobRunState.QUEUED, JobRunState.SUBMITTING, JobRunState.PENDING, JobRunState.RUNNING)


class JobKind(models.TextChoices):
    EVAL = "eval"
    DISCOVERY = "discovery"
    COMMAND = "command"
    INSPECTION = "inspection"  # planner.inspectjob: read an artifact's files where they lie


class JobRun(BaseModel):
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="runs")
    kind = models.CharField(max_length=10, choices=JobKind.choices)
    subject_type = models.CharField(max_length=64, blank=True)
    subject_id = models.CharField(max_length=64, blank=True)
    command = models.JSONField(help_text="argv of the payload")
    files = models.JSONField(default=dict, help_text="name -> text content uploaded next to the job script")
    time_limit_s = models.PositiveIntegerField()
    cpus = models.PositiveSmallIntegerField(default=1)
    gpus = models.PositiveSmallIntegerField(default=0, help_text="GPUs per node")
    nodes = models.PositiveSmallIntegerField(default=1, help_text="nodes of one allocation (multi-node serving)")
    state = models.CharField(max_length=12, choices=JobRunState.choices, default=JobRunState.QUEUED, db_index=True)
    attempt = models.PositiveSmallIntegerField(default=1)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    timeout_retried = models.BooleanField(default=False)
    job_id = models.CharField(max_length=32, blank=True)
    run_dir = models.CharField(max_length=500, blank=True)
    slurm_state = models.CharField(max_length=40, blank=True)
    reason = models.TextField(blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    poll_interval_s = models.FloatField(default=2.0)
    next_poll_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    log_tail = models.TextField(blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    # Set when someone cancels: however the job then ends (killed, non-zero exit, vanished), it is `cancelled`.
    cancel_requested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.kind} run {self.code} ({self.state})"

    @property
    def spec_name(self) -> str:
        return f"gov-{self.code.hex[:20]}-a{self.attempt}"


class ArtifactLocation(BaseModel):
    """Where one registered artifact's files lie on one cluster: a directory under one of its model roots.

    `manifest` is the artifact's file manifest (governance.artifacts.manifest: one line per file) when
    it was given or computed at registration: the eval job then names the file that differs; its
    SHA-256 is the artifact's weights digest (checked when stored)."""

    artifact = models.ForeignKey("artifacts.ModelArtifact", on_delete=models.CASCADE, related_name="locations")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="artifact_locations")
    path = models.CharField(max_length=400, validators=[PATH, no_parent_segments])
    manifest = models.TextField(blank=True)
    registered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["cluster__name"]
        constraints = [
            # one place per cluster: the eval job reads exactly the files the digest was checked against
            models.UniqueConstraint(fields=["artifact", "cluster"], name="artifact_location_one_per_cluster"),
        ]

    def __str__(self) -> str:
        return f"{self.artifact_id} on {self.cluster_id}: {self.path}"


class EvalKind(models.TextChoices):
    # The registered candidate weights served through the engine the plan names: the only kind that
    # counts for readiness and the gate.
    SERVED = "served", "Served (candidate artifact through the engine)"
    # Quantization simulated in one process on the baseline (a what-if before a checkpoint exists).
    SCREENING = "screening", "Screening (simulated quantization, never evidence for approval)"


class EvalStatus(models.TextChoices):
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"  # the gate failed: the quantized model is not good enough
    ERROR = "error"  # the job did not produce a result
    CANCELLED = "cancelled"  # someone cancelled the job: no verdict, superseded by the next run


class EvalRun(BaseModel):
    """A quantization eval of one deployment request's model under one scheme, run as a cluster job."""

    request = models.ForeignKey(
        "deployments.DeploymentRequest", null=True, blank=True, on_delete=models.CASCADE, related_name="eval_runs"
    )
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="eval_runs")
    job = models.OneToOneField(JobRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="eval_run")
    scheme = models.CharField(max_length=20)
    kind = models.CharField(max_length=10, choices=EvalKind.choices, default=EvalKind.SERVED)
    # What was evaluated, bound by digest: a passed eval counts only for exactly these weights, this
    # engine (and version) and this serving config.
    candidate = models.ForeignKey(
        "artifacts.ModelArtifact", null=True, blank=True, on_delete=models.PROTECT, related_name="candidate_evals"
    )
    candidate_digest = models.CharField(max_length=71, blank=True, db_index=True)
    baseline = models.ForeignKey(
        "artifacts.ModelArtifact", null=True, blank=True, on_delete=models.PROTECT, related_name="baseline_evals"
    )
    baseline_digest = models.CharField(max_length=71, blank=True)
    engine = models.CharField(max_length=20, blank=True)
    engine_version = models.CharField(max_length=40, blank=True, help_text="as reported by the engine the job ran")
    serving = models.JSONField(default=dict, blank=True, help_text="serving config taken from the request's plan")
    generation = models.JSONField(default=dict, blank=True, help_text="temperature, seed, max_new_tokens")
    threshold = models.FloatField(default=0.05)
    status = models.CharField(max_length=10, choices=EvalStatus.choices, default=EvalStatus.RUNNING)
    eval_set_sha256 = models.CharField(max_length=64, blank=True)
    summary = models.JSONField(null=True, blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"eval {self.scheme} ({self.status})"

    @property
    def in_flight(self) -> bool:
        """Still to change by itself (what a page polls for): its job queued or running, or the job
        done and the verdict not yet written, which comes in the next transaction, on the job's
        commit (evaluations.signals.job_finished), or, where that was missed, from beat's jobs.resume
        (evaluations.evals.evals_reconcile). In one query: `EVAL_IN_FLIGHT`."""
        return self.status == EvalStatus.RUNNING or (self.job is not None and self.job.state in ACTIVE_STATES)


EVAL_IN_FLIGHT = models.Q(status=EvalStatus.RUNNING) | models.Q(job__state__in=ACTIVE_STATES)


class InspectionStatus(models.TextChoices):
    RUNNING = "running"
    PASSED = "passed"  # the node read the files and sent its report
    REFUSED = "refused"  # the files were refused (a hostile checkpoint, not the registered digest)
    ERROR = "error"  # the job ended without a report


class ArtifactInspection(BaseModel):
    """One reading of an artifact's files where they lie on a cluster (planner.inspectjob, run on the
    node through the same job path as evals): what the checkpoint says of itself.

    `report` is the node's report less the license texts (each kept once, by fingerprint, as a
    licenses.LicenseText); `precision` is its precision block, the one artifacts.weights reads."""

    artifact = models.ForeignKey("artifacts.ModelArtifact", on_delete=models.CASCADE, related_name="inspections")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="+")
    path = models.CharField(max_length=400)
    job = models.OneToOneField(JobRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="inspection")
    status = models.CharField(max_length=10, choices=InspectionStatus.choices, default=InspectionStatus.RUNNING)
    reason = models.TextField(blank=True)
    refused_file = models.CharField(max_length=400, blank=True)
    weights_digest = models.CharField(max_length=71, blank=True, help_text="what the node's files hash to")
    precision = models.JSONField(null=True, blank=True)
    report = models.JSONField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # artifacts.selectors.artifact_latest_inspection: the newest passed reading of one artifact
            models.Index(fields=["artifact", "status", "-created_at"], name="inspection_latest"),
        ]

    def __str__(self) -> str:
        return f"inspection {self.code} of {self.artifact_id} ({self.status})"
