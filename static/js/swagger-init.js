// Starts Swagger UI on /docs (templates/pages/api_docs.html). A static file, not an inline
// <script>: the CSP allows script from /static only. Nothing is fetched from another host.
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.getAttribute("data-openapi-url"),
    dom_id: "#swagger-ui",
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null  // no badge from validator.swagger.io
  });
})();
