"""What the pieces around training cost or allow: the trigger Lambda's cold start and request building
(`trigger_latency`), building a container profile's environment (`container_env_build`), and which torch loads which
serving export (`export_portability`).

May import: `benchmarks.harness`.
"""
