"""The catalog: instance types and prices by provider and region (shipped data, AWS refresh, custom imports).

Read it through srift.catalog.store; the modules here stay free of heavy imports so the API starts fast.
"""
