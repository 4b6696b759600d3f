// Links from the book into the workspace's sources (`../../engine/src/op.rs`) point outside the
// built book, so they would break under `mdbook serve` and in any hosted copy. This rewrites each
// of them into a link to the same file in the repository whose address `book.toml` gives as
// `git-repository-url` (shown by mdBook as the menu bar's repository button): one address, set in
// one place.
(function () {
    "use strict";
    const button = document.querySelector('a[aria-label="Git repository"]');
    if (!button) {
        return;
    }
    const repository = button.href.replace(/\/$/, "");
    // Where this page sits in `book/src`: `path_to_root` is set by mdBook on every page.
    const bookRoot = new URL(typeof path_to_root === "string" ? path_to_root : "", document.baseURI);
    const page = document.baseURI.slice(bookRoot.href.length);
    // Resolve each link as if the page were still in the workspace's `book/src/`, so that a link
    // leaving the book keeps its path however the book is served.
    const source = new URL(page, "http://workspace/book/src/");
    for (const link of document.querySelectorAll("main a[href]")) {
        const raw = link.getAttribute("href");
        if (/^[a-z]+:|^#|^\//i.test(raw)) {
            continue; // absolute, an anchor on this page, or rooted: not a relative source link
        }
        const target = new URL(raw, source);
        if (target.pathname.startsWith("/book/src/")) {
            continue; // a page or picture of the book itself
        }
        link.href = repository + "/blob/main" + target.pathname + target.hash;
    }
})();
