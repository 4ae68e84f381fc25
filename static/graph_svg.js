/*
 * An "SVG" button in the mode bar of every Plotly graph, next to the PNG camera.
 *
 * The browser draws the SVG itself (Plotly.downloadImage), with the file name
 * that app.components.graph_config gives the graph. Plotly's global config
 * default (Plotly.setPlotConfig) is set the moment plotly.js defines
 * window.Plotly (Dash loads it lazily), so the button is there from the first
 * plot of every dcc.Graph that does not set modeBarButtonsToAdd itself.
 * Server-side exports (SVG, PNG, HTML, Mermaid, DOT) are the links of
 * app/components_export.py.
 */
(function () {
    "use strict";

    function svgButton(Plotly) {
        return {
            name: "downloadSvg",
            title: "Download plot as SVG",
            icon: Plotly.Icons["camera-retro"],
            click: function (gd) {
                var opts = (gd._context && gd._context.toImageButtonOptions) || {};
                Plotly.downloadImage(gd, {
                    format: "svg",
                    filename: opts.filename || "gmpscope",
                    width: opts.width || null,
                    height: opts.height || null
                });
            }
        };
    }

    function install(Plotly) {
        if (Plotly && typeof Plotly.setPlotConfig === "function" && !Plotly.__gmpscopeSvg) {
            Plotly.setPlotConfig({modeBarButtonsToAdd: [svgButton(Plotly)]});
            Plotly.__gmpscopeSvg = true;
        }
    }

    if (window.Plotly) {
        install(window.Plotly);
        return;
    }
    var current;
    try {
        Object.defineProperty(window, "Plotly", {
            configurable: true,
            enumerable: true,
            get: function () { return current; },
            set: function (value) {
                current = value;
                try { install(value); } catch (e) { /* leave the graph as it is */ }
            }
        });
    } catch (e) {
        // Not redefinable: install as soon as plotly.js shows up.
        var timer = setInterval(function () {
            if (window.Plotly) { install(window.Plotly); clearInterval(timer); }
        }, 50);
    }
})();
