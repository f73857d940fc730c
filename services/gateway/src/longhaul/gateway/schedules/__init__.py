"""Runs that start themselves: schedules (cron, interval, one-off) and signed webhooks."""
