"""Deployments above the engine: what serves a scenario's traffic.

One server is a cluster of one (``twin.sim``: a deployment's replicas, or replica groups behind one router);
prefill/decode disaggregation (``pd_pools``, ``pd_sim``) is two pools of such engines joined by a KV link.
``run`` is the one entry point that runs any scenario body.
"""
