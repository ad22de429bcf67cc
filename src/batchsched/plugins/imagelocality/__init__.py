"""ImageLocality: nodes that already hold a pod's images score higher."""
