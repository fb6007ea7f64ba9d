"""Real services that integration tests start and stop (Kubernetes control plane, ...)."""
