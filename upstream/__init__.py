"""Talking to the providers' HTTP APIs: the one shared client (``client``), the providers' error
shapes (``errors``) and a recorded stand-in for a provider (``recorded``).

The recording proxy forwards through ``client``; live calls from Turnscope send through it too.
Nothing here touches the database or parses a response: that is the adapters' and the stream
runner's work.
"""
