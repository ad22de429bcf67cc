// batchsched web UI: refresh <main> in place while the page is open (docs/ui.md). The pages
// read fine without this: it only saves the reader a reload.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var seconds = parseFloat(document.body.getAttribute("data-poll") || "0");
  var live = document.getElementById("live");
  if (!main || !(seconds > 0) || !window.fetch || !window.URL) {
    return;
  }
  var etag = main.getAttribute("data-etag");

  function partUrl() {
    var url = new URL(window.location.href);
    url.searchParams.set("part", "main");
    return url.toString();
  }

  function busy() {
    // Never pull a form control from under the reader's hands.
    var active = document.activeElement;
    return active && main.contains(active) && /^(SELECT|INPUT|TEXTAREA)$/.test(active.tagName);
  }

  function swap(html, tag) {
    var heading;
    main.innerHTML = html;
    etag = tag;
    heading = main.querySelector("h1");
    if (heading) {
      document.title = heading.textContent + " \u00b7 batchsched";
    }
    if (live) {
      live.textContent = "updated " + new Date().toLocaleTimeString();
    }
  }

  function poll() {
    var headers = {};
    if (document.hidden || busy()) {
      window.setTimeout(poll, seconds * 1000);
      return;
    }
    if (etag) {
      headers["If-None-Match"] = etag;
    }
    fetch(partUrl(), { headers: headers, credentials: "same-origin", cache: "no-store" })
      .then(function (answer) {
        if (answer.status === 200) {
          return answer.text().then(function (html) {
            swap(html, answer.headers.get("ETag"));
            window.setTimeout(poll, seconds * 1000);
          });
        }
        if (answer.status === 304) {
          window.setTimeout(poll, seconds * 1000);
        } else if (live) {
          live.textContent = "live updates stopped (" + answer.status + "): reload the page";
        }
        return null;
      })
      .catch(function () {
        // The scheduler restarting, or the network: try again a little later.
        window.setTimeout(poll, seconds * 5000);
      });
  }

  window.setTimeout(poll, seconds * 1000);
})();
