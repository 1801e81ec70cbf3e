"""The durable state: Jobs, their Leases, the Outcome of each Attempt, queue settings, audit, pump health.

Rows change only through the store (``backwave_django.store``), which enforces the legal transitions and the
(worker, attempt) fence. The models name what is stored; they hold no logic that reads the clock or writes.
"""

from __future__ import annotations

import enum
from typing import Any

from django.db import models
from django.db.models import Q

from .core.dependencies import Resolution, RunOn
from .core.health import Health
from .core.records import AuditAction, OutcomeKind
from .core.schedules import Misfire
from .core.states import LIVE_STATES, State
from .core.tags import MAX_TAG_LENGTH
from .core.transitions import CLAIMABLE


def _choices(name: str, values: type[enum.StrEnum], labels: dict[str, str] | None = None) -> Any:
    """Model choices built from a Core enum (values, and labels for the admin), so the two never drift."""
    labels = labels or {}
    members = [(v.name, (v.value, labels.get(v.value, v.value))) for v in values]
    return models.TextChoices(name, members)  # type: ignore[call-overload]  # the functional API, not in the stubs


class JobQuerySet(models.QuerySet["Job"]):
    def claimable(self, queues: list[str], now: object) -> JobQuerySet:
        """Scheduled jobs in ``queues`` that are due at ``now``, in claim order."""
        return self.filter(state=CLAIMABLE, queue__in=queues, due_at__lte=now).order_by(
            "-priority", "due_at", "id"
        )

    def live(self) -> JobQuerySet:
        """Jobs that have not reached a terminal state."""
        return self.filter(state__in=LIVE_STATES)


class Job(models.Model):
    """One unit of work: a wire name (which handler), a JSON payload (its arguments) and where it stands."""

    State = _choices("State", State, {"awaiting_parent": "awaiting parent", "dead_lettered": "dead-lettered"})

    id = models.BigAutoField(primary_key=True, help_text="Also the enqueue order: the claim's tiebreak.")
    wire_name = models.CharField(max_length=128, help_text="Names the handler; stable across deploys.")
    queue = models.CharField(max_length=128, default="default")
    payload = models.TextField(default="{}", help_text="The arguments, as JSON.")
    state = models.CharField(max_length=16, choices=State.choices, default=State.SCHEDULED)
    attempt = models.PositiveIntegerField(default=0, help_text="Attempts started; a claim adds one.")
    max_attempts = models.PositiveIntegerField(default=10)
    due_at = models.DateTimeField(help_text="Claimable once this time has come (state scheduled).")
    created_at = models.DateTimeField()
    terminal_at = models.DateTimeField(null=True, blank=True)
    terminal_cause = models.TextField(blank=True, default="")
    cancel_requested = models.BooleanField(default=False)
    timeout = models.DurationField(
        null=True,
        blank=True,
        help_text="This job's time limit per Attempt; empty: its worker group's TIMEOUT.",
    )
    schedule = models.CharField(
        max_length=128, null=True, blank=True, help_text="The schedule that minted it, if one did."
    )
    scheduled_for = models.DateTimeField(null=True, blank=True, help_text="The tick it was minted for.")
    # The columns added after the first release have database defaults too, so that rows written by raw SQL
    # (another service, an older deploy's statements) get them.
    priority = models.SmallIntegerField(
        default=0, db_default=0, help_text="Claim order within its queue: higher first, from -100 to 100."
    )
    unique_key = models.CharField(
        max_length=255,
        null=True,
        blank=True,
        help_text="At most one unfinished job per wire name holds a key; empty: no key.",
    )
    output_json = models.TextField(
        "output",
        db_column="output",
        null=True,
        blank=True,
        help_text="What the handler returned, as JSON (succeeded jobs only); Job.output decodes it.",
    )
    trace_context = models.TextField(
        blank=True,
        default="",
        db_default="",
        help_text="The trace context it was enqueued in (W3C headers, as JSON).",
    )

    run_on = models.CharField(
        max_length=8,
        choices=_choices("RunOn", RunOn).choices,
        default=RunOn.SUCCESS,
        db_default=RunOn.SUCCESS,
        help_text="With parents: start once all succeeded (success) or once all finished (any).",
    )
    parents_remaining = models.PositiveIntegerField(
        default=0, db_default=0, help_text="Parents not finished yet (awaiting_parent until none)."
    )
    has_children = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Some job depends on it: its terminal transition resolves their edges.",
    )

    objects = JobQuerySet.as_manager()

    #: Not a column: True on the job ``enqueue()`` returned when its unique key was held already (the job
    #: returned is the holder, and nothing was written).
    duplicate = False

    class Meta:
        verbose_name = "job"
        permissions = [
            ("requeue_job", "Can requeue dead-lettered or quarantined jobs"),
            ("cancel_job", "Can cancel jobs"),
            ("pause_queue", "Can pause and resume queues and set their concurrency limits"),
            ("view_job_payload", "Can see job payloads and failure details"),
        ]
        indexes = [
            # The claim's order within a queue: higher priority first, then due time, then enqueue order.
            models.Index(
                fields=["queue", "-priority", "due_at", "id"],
                name="backwave_job_claim_order",
                condition=Q(state="scheduled"),
            ),
            models.Index(
                fields=["state", "terminal_at"],
                name="backwave_job_terminal",
                condition=Q(terminal_at__isnull=False),
            ),
            # The admin's Quarantined and Dead-lettered pages, newest first (id breaks ties), without a sort.
            models.Index(
                fields=["state", "terminal_at", "id"],
                name="backwave_job_set_aside",
                condition=Q(state__in=["dead_lettered", "quarantined"]),
            ),
            # The admin's depth per queue and state (bounded counts) and its list of queues (skip scan); with
            # terminal_at, retention's purge of one queue's finished jobs, oldest first, with no sort.
            models.Index(fields=["queue", "state", "terminal_at"], name="backwave_job_queue_state"),
            # The admin's filter by wire name and search by its prefix (pattern ops on PostgreSQL, so that
            # LIKE 'prefix%' uses it under any collation); a rare wire name would otherwise scan the table.
            models.Index(
                fields=["wire_name", "id"],
                name="backwave_job_wire_name",
                opclasses=["varchar_pattern_ops", "int8_ops"],
            ),
            # The admin's "waiting on a parent" filter, newest first (a partial index: few rows wait).
            models.Index(fields=["-id"], name="backwave_job_awaiting", condition=Q(state="awaiting_parent")),
            # NO_OVERLAP: whether a schedule's previous run is still live, without reading its history.
            models.Index(
                fields=["schedule"],
                name="backwave_job_schedule_live",
                condition=Q(schedule__isnull=False, state__in=[s.value for s in LIVE_STATES]),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=[s.value for s in State]), name="backwave_job_state_valid"
            ),
            # A schedule's tick is minted once, whichever node mints it and however often it tries.
            models.UniqueConstraint(
                fields=["schedule", "scheduled_for"],
                condition=Q(schedule__isnull=False),
                name="backwave_job_schedule_tick",
            ),
            # A unique key is held by at most one unfinished job of a wire name; a finished job frees it.
            models.UniqueConstraint(
                fields=["wire_name", "unique_key"],
                condition=Q(unique_key__isnull=False, state__in=[s.value for s in LIVE_STATES]),
                name="backwave_job_unique_live",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.wire_name} #{self.id} ({self.state})"

    @property
    def output(self) -> Any:
        """What the handler of the Attempt that succeeded returned, decoded; None when it returned None or
        nothing is stored (the job has not succeeded). Raises PayloadDecodeError for a row that no longer
        decodes."""
        from .codec import decode_value

        return None if self.output_json is None else decode_value(self.output_json)


class _QuarantinedManager(models.Manager["QuarantinedJob"]):
    def get_queryset(self) -> models.QuerySet[QuarantinedJob]:
        return super().get_queryset().filter(state=State.QUARANTINED)


class _DeadLetteredManager(models.Manager["DeadLetteredJob"]):
    def get_queryset(self) -> models.QuerySet[DeadLetteredJob]:
        return super().get_queryset().filter(state=State.DEAD_LETTERED)


class QuarantinedJob(Job):
    """Jobs in state quarantined, for their own admin page (a proxy: no table of its own)."""

    objects = _QuarantinedManager()  # type: ignore[assignment,misc]

    class Meta:
        proxy = True
        verbose_name = "quarantined job"


class DeadLetteredJob(Job):
    """Jobs in state dead-lettered, for their own admin page (a proxy: no table of its own)."""

    objects = _DeadLetteredManager()  # type: ignore[assignment,misc]

    class Meta:
        proxy = True
        verbose_name = "dead-lettered job"


class JobOverview(Job):
    """The admin's Overview page (a proxy, so that it has an entry and a permission in the admin index)."""

    class Meta:
        proxy = True
        verbose_name = "overview"
        verbose_name_plural = "overview"


class Dependency(models.Model):
    """An edge: ``child`` waits on ``parent``. It resolves once, when the parent reaches a terminal state (or
    when the child is written, if the parent had already), recording what it did to the child."""

    Resolution = _choices("Resolution", Resolution)

    id = models.BigAutoField(primary_key=True)
    parent = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="child_edges", db_index=False)
    child = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="parent_edges", db_index=False)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution = models.CharField(max_length=16, choices=Resolution.choices, blank=True, default="")

    class Meta:
        verbose_name = "dependency"
        verbose_name_plural = "dependencies"
        indexes = [
            # A parent's terminal transition: its children still unresolved (partial where supported; the
            # unique (parent, child) index serves the same lookup on MariaDB).
            models.Index(
                fields=["parent", "child"],
                name="backwave_dep_unresolved",
                condition=Q(resolved_at__isnull=True),
            ),
            # The parents of a job (its admin page, output_of, retention's check of a purged child).
            models.Index(fields=["child", "parent"], name="backwave_dep_parents"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["parent", "child"], name="backwave_dep_edge_once"),
            models.CheckConstraint(
                condition=Q(child__gt=models.F("parent")), name="backwave_dep_older_parent"
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.child_id} waits on job {self.parent_id}"


class Lease(models.Model):
    """A worker's claim on a running job. It exists exactly while the job is leased.

    Its ``owner`` and ``attempt`` are the fence: an outcome applies only if both still match and the lease has
    not expired. ``queue`` is copied from the job so that per-queue concurrency counts read only this table.
    """

    job = models.OneToOneField(Job, on_delete=models.CASCADE, primary_key=True, related_name="lease")
    queue = models.CharField(max_length=128)
    owner = models.CharField(max_length=255, help_text="The worker id: host:pid:group:suffix.")
    attempt = models.PositiveIntegerField()
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        # One index besides the key: the expiry sweep (queue, oldest expiry) and a limited queue's count.
        indexes = [models.Index(fields=["queue", "expires_at"], name="backwave_lease_queue_expiry")]

    def __str__(self) -> str:
        return f"lease on job {self.job_id} by {self.owner} (attempt {self.attempt})"


class Outcome(models.Model):
    """How one Attempt ended: one row per Attempt, written with the state change it caused."""

    Kind = _choices("Kind", OutcomeKind)

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="outcomes", db_index=False)
    attempt = models.PositiveIntegerField()
    worker = models.CharField(max_length=255, blank=True, default="")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    state_after = models.CharField(max_length=16, choices=Job.State.choices)
    message = models.TextField(blank=True, default="", help_text="The short reason: an error's first line.")
    detail = models.TextField(blank=True, default="", help_text="A failure's traceback, at most 8 KiB.")
    error_type = models.CharField(
        max_length=255,
        blank=True,
        default="",
        db_default="",
        help_text="A failure's exception class, as a dotted path.",
    )
    started_at = models.DateTimeField(null=True, blank=True, help_text="When the Attempt began (its claim).")
    recorded_at = models.DateTimeField()

    class Meta:
        # (job, attempt) also serves the foreign key's lookups, so the key gets no index of its own.
        indexes = [
            models.Index(fields=["job", "attempt"], name="backwave_outcome_job"),
            # The admin overview's failures per minute; partial, so successes (the bulk) cost nothing.
            models.Index(
                fields=["recorded_at"],
                name="backwave_outcome_failed_at",
                condition=Q(kind__in=["failed", "expired"]),
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} attempt {self.attempt}: {self.kind}"


class QueueSettings(models.Model):
    """A queue's runtime settings, shared by the whole cluster: paused, and a cap on jobs leased at once."""

    queue = models.CharField(max_length=128, primary_key=True)
    paused = models.BooleanField(default=False)
    concurrency_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="At most this many jobs of the queue leased at once; empty: no cap."
    )
    updated_at = models.DateTimeField()

    class Meta:
        verbose_name = "queue settings"
        verbose_name_plural = "queue settings"

    def __str__(self) -> str:
        return self.queue


class AuditRecord(models.Model):
    """An operator action (cancel, requeue, pause, ...), recorded with the actor in the same transaction."""

    Action = _choices("Action", AuditAction)

    id = models.BigAutoField(primary_key=True)
    actor = models.CharField(max_length=255)
    action = models.CharField(max_length=32, choices=Action.choices)
    target = models.CharField(max_length=255, help_text="A job id or a queue name.")
    detail = models.TextField(blank=True, default="")
    recorded_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["target", "id"], name="backwave_audit_target")]

    def __str__(self) -> str:
        return f"{self.actor}: {self.action} {self.target}"


class PumpStatus(models.Model):
    """What each Pump last said about itself: running, degraded, halted or stopped, and when."""

    Health = _choices("Health", Health)

    worker_id = models.CharField(max_length=255, primary_key=True)
    group = models.CharField(max_length=128)
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.CharField(max_length=1024, blank=True, default="")
    health = models.CharField(max_length=16, choices=Health.choices, default=Health.RUNNING)
    detail = models.TextField(blank=True, default="")
    started_at = models.DateTimeField()
    last_beat_at = models.DateTimeField()

    class Meta:
        verbose_name = "pump status"
        verbose_name_plural = "pump statuses"
        indexes = [models.Index(fields=["group", "last_beat_at"], name="backwave_pump_group")]

    def __str__(self) -> str:
        return f"{self.worker_id} ({self.health})"


class Schedule(models.Model):
    """A recurring schedule, as ``BACKWAVE['SCHEDULES']`` declares it, and where it stands: the last tick
    it decided (its cursor), whether an operator paused it, how many ticks it skipped. Workers synchronise the
    rows from the setting when they start; a schedule removed from the setting is kept, marked removed, and
    stops."""

    Misfire = _choices("Misfire", Misfire)

    name = models.CharField(max_length=128, primary_key=True)
    wire_name = models.CharField(max_length=128, help_text="The job each tick mints.")
    queue = models.CharField(max_length=128)
    payload = models.TextField(default="{}", help_text="The job's arguments (KWARGS), as JSON.")
    cron = models.CharField(max_length=128, blank=True, default="", help_text="Empty for an EVERY schedule.")
    every = models.DurationField(null=True, blank=True, help_text="The interval of an EVERY schedule.")
    timezone = models.CharField(max_length=64, default="UTC")
    misfire = models.CharField(max_length=16, choices=Misfire.choices, default=Misfire.SKIP)
    no_overlap = models.BooleanField(default=False)
    max_attempts = models.PositiveIntegerField(default=10)
    timeout = models.DurationField(null=True, blank=True)
    cursor = models.DateTimeField(help_text="The last tick decided (minted or skipped).")
    paused = models.BooleanField(default=False)
    removed_at = models.DateTimeField(null=True, blank=True, help_text="When it left BACKWAVE['SCHEDULES'].")
    skipped_count = models.PositiveBigIntegerField(default=0)
    recent_skips = models.TextField(default="[]", help_text="Its newest skipped ticks, as a JSON list.")
    last_run_at = models.DateTimeField(null=True, blank=True, help_text="The tick of its latest minted job.")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        permissions = [("operate_schedule", "Can pause and resume schedules, and run them now")]

    def __str__(self) -> str:
        return self.name


class JobTag(models.Model):
    """One tag a job carries, in its stored form (``core.tags``: a label, or ``key:value``).

    A job holds each tag once (the unique constraint, which also serves the job's own lookups). The second
    index leads with the tag, so the admin's filter and prefix search by tag read only the matching jobs,
    newest first, whatever the table's size. Rows are written by the store only: at enqueue, and with an
    Attempt's outcome under the fence; they go with their job.
    """

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="tags", db_index=False)
    tag = models.CharField(max_length=MAX_TAG_LENGTH)

    class Meta:
        verbose_name = "job tag"
        constraints = [models.UniqueConstraint(fields=["job", "tag"], name="backwave_jobtag_unique")]
        indexes = [
            # Pattern ops on PostgreSQL, so that LIKE 'prefix%' (the admin's search) uses it under any
            # collation; equality uses it too.
            models.Index(
                fields=["tag", "job"],
                name="backwave_jobtag_tag",
                opclasses=["varchar_pattern_ops", "int8_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tag} on job {self.job_id}"
