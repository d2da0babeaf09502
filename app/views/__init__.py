"""View layer: what a screen shows, as finished objects. No FastAPI, no JSON dicts.

URL view state (`view_state`), every link (`urls`), every number as text
(`numbers`), the screen (`screen`), graph, inspector, parameter form,
training-path panel and chart geometry (`charts/`). Imports engine and domain.
"""
