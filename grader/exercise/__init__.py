"""The exercise interface: what an assignment declares, its cases, the case store and fingerprints.

Modules: assignment, case_store, fingerprint.
"""
