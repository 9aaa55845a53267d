// The dashboard's one script: it keeps a page's live part up to date and
// writes how long ago each time was. The pages work without it; with it,
// they change without a reload. It loads nothing from elsewhere.
(function () {
  'use strict';

  // Relative times: <span data-rel="RFC 3339"> gets "(3m ago)" or "(in 2h)".
  function relText(ms) {
    var s = Math.round(Math.abs(ms) / 1000);
    var t;
    if (s < 60) {
      t = s + 's';
    } else if (s < 3600) {
      t = Math.floor(s / 60) + 'm';
    } else if (s < 172800) {
      t = Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
    } else {
      t = Math.floor(s / 86400) + 'd';
    }
    return ms >= 0 ? '(' + t + ' ago)' : '(in ' + t + ')';
  }

  function updateRelative() {
    var now = Date.now();
    var els = document.querySelectorAll('[data-rel]');
    for (var i = 0; i < els.length; i++) {
      var t = Date.parse(els[i].getAttribute('data-rel'));
      if (!isNaN(t)) {
        els[i].textContent = relText(now - t);
      }
    }
  }

  // The live part: #live[data-live] is replaced by the page's part=live
  // reply every data-interval ms while the page is visible, when it
  // changed. A part with data-final="true" (a finished run) is the last.
  var live = document.getElementById('live');
  var state = document.getElementById('live-state');
  var url = live && live.getAttribute('data-live');
  var interval = live ? parseInt(live.getAttribute('data-interval'), 10) || 2000 : 0;
  var last = null;
  var timer = null;
  var stopped = false;
  var inFlight = false;

  function say(text) {
    if (state) {
      state.textContent = text;
    }
  }

  function isFinal() {
    var f = live.querySelector('[data-final]');
    return f !== null && f.getAttribute('data-final') === 'true';
  }

  function finish() {
    stopped = true;
    var active = document.querySelectorAll('[data-while-active]');
    for (var i = 0; i < active.length; i++) {
      active[i].parentNode.removeChild(active[i]);
    }
    say('Final: this page no longer changes.');
  }

  function schedule(ms) {
    clearTimeout(timer);
    if (!stopped) {
      timer = setTimeout(poll, ms);
    }
  }

  function poll() {
    if (stopped || inFlight) {
      return;
    }
    if (document.hidden) {
      say('Paused while the page is hidden.');
      return; // visibilitychange polls again
    }
    inFlight = true;
    var next = interval;
    fetch(url, { credentials: 'same-origin', cache: 'no-store', headers: { 'Accept': 'text/html' } })
      .then(function (resp) {
        if (resp.status === 401) {
          stopped = true;
          window.location.reload(); // to the login page
          return null;
        }
        if (resp.status === 429 || resp.status === 503) {
          var after = parseInt(resp.headers.get('Retry-After'), 10);
          next = Math.max(interval, (after || 5) * 1000);
          say('The daemon asked to wait; retrying in ' + Math.round(next / 1000) + 's.');
          return null;
        }
        if (!resp.ok) {
          next = interval * 5;
          say('Live updates failed (HTTP ' + resp.status + '); retrying.');
          return null;
        }
        return resp.text();
      })
      .then(function (html) {
        if (html === null || html === undefined) {
          return;
        }
        if (html !== last) {
          live.innerHTML = html;
          last = html;
          updateRelative();
        }
        // In UTC, on the 24-hour clock, as the page's times are.
        say('Live: updated ' + new Date().toISOString().slice(11, 19) + ' UTC.');
        if (isFinal()) {
          finish();
        }
      })
      .catch(function () {
        next = interval * 5;
        say('The daemon does not answer; retrying.');
      })
      .then(function () {
        inFlight = false;
        schedule(next);
      });
  }

  updateRelative();
  setInterval(updateRelative, 1000);
  if (live && url) {
    if (isFinal()) {
      finish();
    } else {
      say('Live.');
      schedule(interval);
      document.addEventListener('visibilitychange', function () {
        if (!document.hidden && !stopped) {
          schedule(0);
        }
      });
    }
  }
})();
