"""Long-lived sandboxes: processes, files, watchers and code contexts in a container that stays up
between calls (what E2B's SDKs and sessions use)."""
