"""batchsched: a Kubernetes batch scheduler whose core also runs as an offline simulator."""

__version__ = "0.1.0"
