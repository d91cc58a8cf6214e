"""The recording proxy: an app points its provider SDK's base URL at ``/proxy/<provider>``; every
request goes on to the provider unchanged and the app gets the provider's bytes as they arrive,
while a copy is recorded into Turnscope (adapter -> the one stream runner -> store, live).

``app`` is the ASGI app (routed ahead of Django by ``turnscope.asgi``), ``endpoints`` the table of
what is recorded, ``messages`` reads request bodies, ``threads`` decides which conversation and
turn a request records into, ``recorder`` records off the client's path.
"""
