"""Agents in any language, at their model and MCP wire (``docs/any-language.md``): the recording proxy
(:mod:`.proxy`) and the replay server (:mod:`.serve`) of the three model endpoints (:mod:`.endpoints`), the
forwarding they share (:mod:`.forward`), the runs the proxy groups requests into (:mod:`.runs`), the steps both
record (:mod:`.recorded`), their HTTP side (:mod:`.httpd`), and the stdio MCP proxy and server
(:mod:`.mcp_proxy`, :mod:`.mcp_serve`, :mod:`.mcp_steps`).
"""
