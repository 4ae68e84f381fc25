"""The page frame around every page: header, location, content slot."""

from __future__ import annotations

from dash import dcc, html


def shell(logout: bool = False) -> html.Div:
    """The app layout: a header (library, live sessions, SQL, API; a log-out link
    when the server needs a token) and a slot the router fills."""
    nav = [
        dcc.Link("Library", href="/", className="header-link"),
        dcc.Link("Live", href="/live", className="header-link"),
        dcc.Link("SQL", href="/sql", className="header-link", id="nav-sql"),
        html.A("API", href="/api/traces", className="header-link", target="_blank"),
    ]
    if logout:  # a plain link: /logout is a Flask route, not a Dash page
        nav.append(html.A("Log out", href="/logout", className="header-link", id="nav-logout"))
    return html.Div([
        dcc.Location(id="url", refresh=False),
        html.Header([
            dcc.Link("gmpscope", href="/", className="brand"),
            html.Span("Go runtime explorer: goroutines, threads, procs, netpoller, syscalls",
                      className="tagline"),
            html.Nav(nav, className="header-nav"),
        ], className="app-header"),
        html.Main(id="page-content", className="page"),
    ])
