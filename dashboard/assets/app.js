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

  // Live output: a <pre data-follow="URL"> of a running attempt shows
  // the attempt's output as it is written (URL streams it as text until
  // the attempt ends). Its text is kept bounded as the stored output is:
  // the first and the last keepChars characters, with a line for what is
  // left out between. The element and its stream are kept across the
  // replacements of the live part while the part still has it, that is
  // while the attempt runs; then the stored output takes its place.
  var keepChars = 65536;
  var followers = {}; // by the element's id

  function followOutput(el) {
    var f = { el: el, url: el.getAttribute('data-follow'), head: '', tail: '', left: 0, note: '', ctrl: null, drawn: false, tries: 0 };
    followers[el.id] = f;
    streamOutput(f);
  }

  function addOutput(f, text) {
    if (f.head.length < keepChars) {
      var n = keepChars - f.head.length;
      f.head += text.slice(0, n);
      text = text.slice(n);
    }
    f.tail += text;
    if (f.tail.length > 2 * keepChars) {
      var cut = f.tail.length - keepChars;
      f.left += cut;
      f.tail = f.tail.slice(cut);
    }
    drawLater(f);
  }

  function drawLater(f) {
    if (!f.drawn) {
      f.drawn = true;
      setTimeout(function () { f.drawn = false; drawOutput(f); }, 50);
    }
  }

  // drawOutput writes the text as text: nothing a job prints becomes
  // markup.
  function drawOutput(f) {
    var el = f.el;
    while (el.firstChild) {
      el.removeChild(el.firstChild);
    }
    if (f.note) {
      var note = document.createElement('span');
      note.className = 'gap';
      note.textContent = f.note;
      el.appendChild(note);
    }
    el.appendChild(document.createTextNode(f.head));
    if (f.left > 0) {
      var gap = document.createElement('span');
      gap.className = 'gap';
      gap.textContent = '\n[… ' + f.left + ' characters not shown here …]\n';
      el.appendChild(gap);
    }
    el.appendChild(document.createTextNode(f.tail));
  }

  function streamOutput(f) {
    f.ctrl = window.AbortController ? new AbortController() : null;
    fetch(f.url, { credentials: 'same-origin', cache: 'no-store', signal: f.ctrl ? f.ctrl.signal : undefined })
      .then(function (resp) {
        var state = resp.headers.get('Schedulerd-Output');
        if (!resp.ok || !state || !resp.body || !window.TextDecoder) {
          if ((resp.status === 429 || resp.status === 503) && f.tries < 10) {
            f.tries++;
            f.note = 'The daemon follows as many outputs as it does at once: trying again.\n';
            drawOutput(f);
            var after = parseInt(resp.headers.get('Retry-After'), 10) || 5;
            setTimeout(function () {
              if (followers[f.el.id] === f) {
                streamOutput(f);
              }
            }, Math.max(after, 2) * 1000);
            return null;
          }
          f.note = 'The output shows here when the attempt ends.\n';
          drawOutput(f);
          return null;
        }
        if (state === 'elsewhere') {
          f.note = 'The attempt runs on node ' + (resp.headers.get('Schedulerd-Node') || '?') +
            ': its output shows here when it ends.\n';
        } else {
          f.note = '';
        }
        f.head = '';
        f.tail = '';
        f.left = 0;
        drawOutput(f);
        var reader = resp.body.getReader();
        var dec = new TextDecoder();
        var pump = function () {
          return reader.read().then(function (r) {
            if (r.done) {
              addOutput(f, dec.decode());
              return null;
            }
            addOutput(f, dec.decode(r.value, { stream: true }));
            return pump();
          });
        };
        return pump();
      })
      .catch(function () {
        // Aborted, or the connection failed: the live part shows the
        // stored output once the attempt ends.
      });
  }

  // keepFollowers puts the elements being followed into the live part
  // just made, in place of their new empty copies; starts following the
  // new ones; and stops those the part no longer has.
  function keepFollowers(root) {
    var seen = {};
    var els = root.querySelectorAll('[data-follow]');
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      var f = followers[el.id];
      seen[el.id] = true;
      if (f && f.url === el.getAttribute('data-follow')) {
        if (f.el !== el) {
          el.parentNode.replaceChild(f.el, el);
        }
      } else {
        if (f && f.ctrl) {
          f.ctrl.abort();
        }
        followOutput(el);
      }
    }
    for (var id in followers) {
      if (Object.prototype.hasOwnProperty.call(followers, id) && !seen[id]) {
        if (followers[id].ctrl) {
          followers[id].ctrl.abort();
        }
        delete followers[id];
      }
    }
  }

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
          keepFollowers(live);
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
  keepFollowers(document);
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
