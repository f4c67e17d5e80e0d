/* How the book's pages fit a reader's screen (loaded on every page by _config.yml).

   Sections: a chapter's closed sections (book/_ext/bias_book_sphinx.py) hold charts drawn at a guessed width while
   closed, so opening a section asks its charts to fit their box again (rendering.py's drawing listens for resize);
   a link into a closed section opens it.

   Tables: no table is wider than the article. A results table that would be (bias_utils.report.rendering marks its
   detail columns and offers the whole table as CSV) shows its main columns, as on a phone, with the CSV a click
   away ("bias-table-narrow"); a table still too wide (a hand-written one, or one of few very long columns) is
   shown a row at a time, each cell under its column's name ("bias-table-stacked"). Words break only between words. */
(function () {
  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var el = id && document.getElementById(id);
    for (var d = el && el.closest("details.bias-section"); d; d = d.parentElement.closest("details.bias-section"))
      d.open = true;
    if (el) el.scrollIntoView();
  }

  function box(table) {
    var el = table.parentElement;
    while (el && el !== document.body && getComputedStyle(el).display === "inline") el = el.parentElement;
    var article = document.querySelector("article.bd-article") || document.querySelector("main") || document.body;
    return Math.min(el ? el.clientWidth : Infinity, article.clientWidth);
  }

  function labels(table) {
    if (table.hasAttribute("data-labelled")) return;
    var head = table.querySelector("thead tr") || null;
    var names = head ? [].map.call(head.children, function (th) { return th.innerText.trim(); }) : [];
    [].forEach.call(table.querySelectorAll("tbody tr"), function (tr) {
      [].forEach.call(tr.children, function (td, i) {
        if (names[i] && !td.hasAttribute("data-label")) td.setAttribute("data-label", names[i]);
      });
    });
    table.setAttribute("data-labelled", "");
  }

  function fitTables() {
    var article = document.querySelector("article.bd-article") || document.querySelector("main");
    if (!article) return;
    [].forEach.call(article.querySelectorAll("table"), function (table) {
      if (!table.getClientRects().length) return;  // in a closed section: fitted when it opens
      var wrap = table.closest(".bias-table");
      table.classList.remove("bias-table-stacked");
      if (wrap) wrap.classList.remove("bias-table-narrow");
      var room = box(table);
      if (table.scrollWidth <= room + 1) return;
      if (wrap && table.querySelector(".bias-detail")) {
        wrap.classList.add("bias-table-narrow");
        if (table.scrollWidth <= room + 1) return;
      }
      labels(table);
      table.classList.add("bias-table-stacked");
    });
  }

  var timer = null;
  function later() { clearTimeout(timer); timer = setTimeout(fitTables, 100); }
  document.addEventListener("toggle", function (ev) {
    if (ev.target.matches && ev.target.matches("details") && ev.target.open) {
      fitTables();
      if (ev.target.matches("details.bias-section")) window.dispatchEvent(new Event("resize"));
    }
  }, true);
  window.addEventListener("resize", later);
  window.addEventListener("hashchange", openTarget);
  function start() { openTarget(); fitTables(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
  window.biasFitTables = fitTables;
})();
