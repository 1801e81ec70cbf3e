"""The names backwave's spans, metrics and attributes use, in one place (``docs/howto/telemetry.md`` lists
them). Where OpenTelemetry's messaging conventions have a name for a thing, it is theirs (``messaging.*``,
``error.type``); what only backwave has is under ``backwave.*``."""

from __future__ import annotations

#: The instrumentation scope (tracer and meter name).
SCOPE = "backwave_django"
#: ``messaging.system``: the messaging system, as the conventions identify one.
SYSTEM = "backwave"

# -- attributes ------------------------------------------------------------------------------------------
MESSAGING_SYSTEM = "messaging.system"
OPERATION_TYPE = "messaging.operation.type"  # process (an Attempt), receive (a claim), settle (a report)
OPERATION_NAME = "messaging.operation.name"  # enqueue, attempt, claim, report, sweep
DESTINATION = "messaging.destination.name"  # the queue
MESSAGE_ID = "messaging.message.id"  # the job id, as text
CLIENT_ID = "messaging.client.id"  # the worker id (host:pid:group:suffix)
CONSUMER_GROUP = "messaging.consumer.group.name"  # the worker group
BATCH_COUNT = "messaging.batch.message_count"  # jobs a claim, report or sweep touched
ERROR_TYPE = "error.type"  # the exception class of a failed Attempt, as module.QualName
WIRE_NAME = "backwave.job.wire_name"
ATTEMPT = "backwave.job.attempt"  # 1 for the first Attempt
MAX_ATTEMPTS = "backwave.job.max_attempts"
OUTCOME = "backwave.outcome"  # Attempt spans: succeeded or failed; the attempts counter: every outcome kind
HEALTH = "backwave.pump.health"  # running, degraded, halted or stopped

# -- spans -----------------------------------------------------------------------------------------------
ATTEMPT_SPAN = "backwave.attempt"  # + " <wire name>"
CLAIM_SPAN = "backwave.claim"  # with DEBUG_SPANS only, as the next two
REPORT_SPAN = "backwave.report"
SWEEP_SPAN = "backwave.sweep"

# -- metrics ---------------------------------------------------------------------------------------------
ENQUEUED = "messaging.client.sent.messages"  # counter: jobs enqueued, by queue
CLAIMED = "messaging.client.consumed.messages"  # counter: jobs claimed, by queue and group
ATTEMPT_DURATION = "messaging.process.duration"  # histogram, s: each Attempt's handler call
ATTEMPTS = "backwave.attempts"  # counter: Attempts ended, by outcome and group
PICKUP_LATENCY = "backwave.pickup.latency"  # histogram, s: from a job's due time to its Attempt's start
QUEUE_DEPTH = "backwave.queue.depth"  # gauge: scheduled jobs per queue (bounded)
QUEUE_LEASED = "backwave.queue.leased"  # gauge: leased jobs per queue (bounded)
PUMPS = "backwave.pumps"  # gauge: this process's Pumps, by group and health
