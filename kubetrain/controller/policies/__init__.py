"""The operator's policies, one concern per module, each a pure function of the job, its
observed children and the time: startup gating, success, restarts, cleanup, deadlines
(activeDeadlineSeconds and TTL), suspension, managedBy, and a job's end (finish)."""
