"""The suite's core: the check registry, verdicts, the runner, the report and the tightness table."""
