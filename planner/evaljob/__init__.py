"""The eval job payload that runs on the cluster: baseline vs quantized, metrics, result.json."""
