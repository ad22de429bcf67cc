"""NodeName: a pod that names its node goes there or nowhere."""
