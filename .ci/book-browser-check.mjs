// Checks the built book (`mdbook build book`) in a real headless Chromium, at a 1280 px wide
// window with the sidebar open, the way a reader sees it:
//
// - every page loads, and no file it asks for (script, style, picture) is missing;
// - every link into the book names a file of the built book, and a `#fragment` on it an element of
//   that page; no link leads to a placeholder address (a reserved name such as `example.invalid`,
//   which can never resolve); every picture has loaded;
// - no code block and no table is wider than its column (nothing cut off or scrolled sideways);
// - in a window as narrow as a phone (390 px), every picture is drawn at 75% of its size or more,
//   so that its 12 px text stays legible (the book's pictures are drawn about 400 px wide for it).
//
// Usage: node --experimental-websocket .ci/book-browser-check.mjs [book/book] [what it is]
// Any folder of HTML pages whose content sits in a <main> element can be checked the same way: CI
// also runs it on the compile report (`compile-report models`).
// It needs `chromium` (Debian's package) on PATH, and nothing else: Node's own HTTP server serves
// the book and Chromium is driven through the DevTools protocol over a WebSocket.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, existsSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { extname, join, relative, resolve, sep } from "node:path";

const WIDTH = 1280;
const PHONE = 390;
const bookDir = resolve(process.argv[2] ?? "book/book");
const what = process.argv[3] ?? "the built book";
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml",
    ".png": "image/png", ".woff2": "font/woff2", ".json": "application/json", ".ico": "image/x-icon" };

// A static file server for the book, which remembers every request it could not answer.
const missing = new Set();
const server = createServer((request, response) => {
    const path = decodeURIComponent(new URL(request.url, "http://book").pathname);
    let file = join(bookDir, path);
    if (existsSync(file) && statSync(file).isDirectory()) file = join(file, "index.html");
    if (!file.startsWith(bookDir) || !existsSync(file)) {
        missing.add(path);
        response.writeHead(404).end();
        return;
    }
    response.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
    response.end(readFileSync(file));
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const origin = `http://127.0.0.1:${server.address().port}`;

// Chromium, headless, with the DevTools protocol on a port it picks and reports on stderr.
const profile = mkdtempSync(join(tmpdir(), "book-check-"));
const chromium = spawn(process.env.CHROMIUM ?? "chromium", ["--headless=new", "--no-sandbox", "--disable-gpu",
    "--no-first-run", `--user-data-dir=${profile}`, "--remote-debugging-port=0", "about:blank"],
    { stdio: ["ignore", "ignore", "pipe"] });
const endpoint = await new Promise((ok, fail) => {
    let seen = "";
    chromium.stderr.on("data", (chunk) => {
        seen += chunk;
        const found = /DevTools listening on (ws:\/\/\S+)/.exec(seen);
        if (found) ok(found[1]);
    });
    chromium.on("exit", (code) => fail(new Error(`chromium exited (${code}) before it listened:\n${seen}`)));
});

// The DevTools protocol: numbered requests, answers matched by id, events handed to waiters.
const socket = new WebSocket(endpoint);
await new Promise((ok) => socket.addEventListener("open", ok));
let nextId = 0;
const pending = new Map();
const waiters = [];
socket.addEventListener("message", (event) => {
    const message = JSON.parse(event.data);
    if (message.id !== undefined) {
        const { ok, fail } = pending.get(message.id);
        pending.delete(message.id);
        message.error ? fail(new Error(JSON.stringify(message.error))) : ok(message.result);
    } else {
        for (const waiter of waiters.splice(0)) waiter(message);
    }
});
const send = (method, params = {}, sessionId) => new Promise((ok, fail) => {
    const id = ++nextId;
    pending.set(id, { ok, fail });
    socket.send(JSON.stringify({ id, method, params, sessionId }));
});
const nextEvent = (method) => new Promise((ok) => {
    const wait = (message) => (message.method === method ? ok(message) : waiters.push(wait));
    waiters.push(wait);
});

const { targetId } = await send("Target.createTarget", { url: "about:blank" });
const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
const page = (method, params) => send(method, params, sessionId);
await page("Page.enable");
await page("Emulation.setDeviceMetricsOverride", { width: WIDTH, height: 900, deviceScaleFactor: 1, mobile: false });

// Runs in each page: what a reader would find wrong.
const inspect = `(() => {
    const problems = [];
    const main = document.querySelector("main");
    const column = main.getBoundingClientRect();
    const where = (el) => (el.textContent || "").trim().split("\\n")[0].slice(0, 70);
    // The scrolling box of a code block is the <pre> or, in mdBook's theme, the <code> inside it.
    for (const pre of main.querySelectorAll("pre")) {
        const cut = Math.max(...[pre, ...pre.children].map((el) => el.scrollWidth - el.clientWidth),
            pre.getBoundingClientRect().right - column.right);
        if (cut > 1) problems.push("code block overflows by " + Math.round(cut) + " px: " + where(pre));
    }
    for (const table of main.querySelectorAll("table")) {
        const box = table.parentElement;
        const cut = Math.max(table.getBoundingClientRect().right - column.right, box.scrollWidth - box.clientWidth);
        if (cut > 1) problems.push("table overflows by " + Math.round(cut) + " px: " + where(table));
    }
    for (const img of document.querySelectorAll("img")) {
        if (!img.complete || img.naturalWidth === 0) problems.push("picture does not load: " + img.getAttribute("src"));
    }
    const hrefs = [...document.querySelectorAll("a[href]")].map((a) => a.href);
    const links = hrefs.filter((h) => h.startsWith(location.origin));
    const external = hrefs.filter((h) => !h.startsWith(location.origin) && /^https?:/.test(h));
    const ids = [...document.querySelectorAll("[id]")].map((el) => el.id);
    return JSON.stringify({ problems, links, external, ids });
})()`;

const pages = [];
const walk = (dir) => {
    for (const name of readdirSync(dir).sort()) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (name.endsWith(".html") && !["print.html", "toc.html", "404.html"].includes(name)) pages.push(path);
    }
};
walk(bookDir);

// Loads one page of the book and returns what `expression` computes in it.
async function visit(name, expression) {
    const loaded = nextEvent("Page.loadEventFired");
    await page("Page.navigate", { url: `${origin}/${name}` });
    await Promise.race([loaded, new Promise((_, fail) => setTimeout(() => fail(new Error(`${name}: no load in 20 s`)), 20000))]);
    const { result } = await page("Runtime.evaluate", { expression, returnByValue: true });
    return JSON.parse(result.value);
}

// Runs in each page with pictures, in a phone-wide window: the pictures scaled down too far.
const shrunk = `JSON.stringify([...document.querySelectorAll("main img")]
    .filter((img) => img.offsetParent !== null && img.naturalWidth > 0)
    .filter((img) => img.getBoundingClientRect().width < 0.75 * img.naturalWidth)
    .map((img) => img.getAttribute("src") + " is drawn at " +
        Math.round(100 * img.getBoundingClientRect().width / img.naturalWidth) + "% of its size"))`;

// Host names reserved so that they never resolve (RFC 2606, RFC 6761): a link to one is a
// placeholder someone forgot to replace, broken wherever the book is read.
const placeholder = (host) => /(^|\.)(invalid|example|test)$/.test(host) || /^example\.(com|net|org)$/.test(host);

const report = [];
const withPictures = [];
const idsOf = new Map(); // page path -> its element ids
const fragmentLinks = []; // [page, target path, fragment]
for (const file of pages) {
    const name = relative(bookDir, file).split(sep).join("/");
    missing.clear();
    const { problems, links, external, ids } = await visit(name, inspect);
    idsOf.set(`/${name}`, new Set(ids));
    if (readFileSync(file, "utf8").includes("<img")) withPictures.push(name);
    for (const link of new Set(links)) {
        const url = new URL(link);
        const path = decodeURIComponent(url.pathname);
        if (!existsSync(join(bookDir, path))) problems.push(`broken link: ${path}`);
        else if (url.hash.length > 1) fragmentLinks.push([name, path, decodeURIComponent(url.hash.slice(1))]);
    }
    for (const link of new Set(external)) {
        if (placeholder(new URL(link).hostname)) problems.push(`link to a placeholder address: ${link}`);
    }
    for (const path of missing) problems.push(`requested but missing: ${path}`);
    for (const problem of problems) report.push(`${name}: ${problem}`);
}
// A fragment must name an element of the page it points into (pages the walk did not visit, such as
// print.html, are not checked).
for (const [name, path, fragment] of fragmentLinks) {
    const ids = idsOf.get(path.endsWith("/") ? `${path}index.html` : path);
    if (ids && !ids.has(fragment)) report.push(`${name}: broken link: ${path}#${fragment} (no element has that id)`);
}
await page("Emulation.setDeviceMetricsOverride", { width: PHONE, height: 800, deviceScaleFactor: 1, mobile: false });
for (const name of withPictures) {
    for (const problem of await visit(name, shrunk)) report.push(`${name} at ${PHONE} px: ${problem}, too small to read`);
}

// Close the browser through the protocol, so that it stops writing to its profile before the
// profile is removed; a profile left behind in the temporary folder is no failure.
const exited = new Promise((ok) => chromium.on("exit", ok));
await send("Browser.close").catch(() => chromium.kill());
await exited;
socket.close();
server.close();
try {
    rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
} catch (error) {
    console.error(`note: could not remove ${profile}: ${error.message}`);
}
if (report.length) {
    console.error(`${report.length} problem(s) in ${what}:\n${report.join("\n")}`);
    process.exit(1);
}
console.log(`${what}: ${pages.length} pages load at ${WIDTH} px: no broken link (${fragmentLinks.length} with a fragment) or picture, no code block or table cut off; ` +
    `the pictures of ${withPictures.length} pages stay legible at ${PHONE} px`);
