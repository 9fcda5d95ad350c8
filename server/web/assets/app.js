// tollgate reviewer page. Plain JavaScript, no framework, no build step.
// Rule one: data from the server is only ever put in the page as text
// (textContent, text nodes, createElement): never as HTML.
'use strict';
const D = document;
const B = D.body;
const $ = (id) => D.getElementById(id);

const hasRaw = typeof JSON.rawJSON === 'function';
const isRaw = (v) => hasRaw && JSON.isRawJSON(v);
// lossy: a number literal a double cannot hold digit for digit.
function lossy(src, v) {
	if (!Number.isFinite(v)) return true;
	const m = src.replace(/^-/, '').replace(/[eE].*$/, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '');
	return m.length > 15;
}
const exactNum = (src, v) => (hasRaw && lossy(src, v) ? JSON.rawJSON(src) : v);
function parseAPI(text) {
	return JSON.parse(text, function (k, v, ctx) {
		return typeof v === 'number' && ctx && ctx.source ? exactNum(ctx.source, v) : v;
	});
}

// parseJSON: the editor's JSON, numbers exact; err.pos is where it is wrong.
function parseJSON(src) {
	try {
		return parseAPI(src);
	} catch (e) {
		const m = /at position (\d+)/.exec(e.message);
		throw Object.assign(new SyntaxError(e.message.replace(/ in JSON at position.*|,? "[^]*" is not valid JSON$/, '')), { pos: m ? +m[1] : src.length });
	}
}


// Canonical text of a value (keys sorted), to compare two values.
function canon(v) {
	if (v === null || typeof v !== 'object' || isRaw(v)) return JSON.stringify(v);
	if (Array.isArray(v)) return '[' + v.map(canon).join(',') + ']';
	return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}';
}
const pretty = (v) => JSON.stringify(v, null, 2);

// ---------- characters that hide or reorder text ----------
const SPECIAL = /[\0-\x08\x0B-\x1F\x7F-\x9F\xAD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180B-\u180F\u200B-\u200F\u2028-\u202E\u2060-\u206F\u3164\uFEFF\uFFA0\uFFF9-\uFFFB]|\uDB40[\uDC00-\uDC7F\uDD00-\uDDEF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
function badge(ch) {
	const cp = ch.codePointAt(0);
	const code = 'U+' + cp.toString(16).toUpperCase().padStart(4, '0');
	return el('span', { class: 'cc', title: 'a hidden character: ' + code }, '⟨' + code + '⟩');
}
// PAD: padding (over 3 blank lines, 16 blanks), counted as display.Text.
const BK = '[\\t \\xA0\\u1680\\u2000-\\u200A\\u202F\\u205F\\u3000]';
const PAD = '(?:^|(?<=\\n))(?:' + BK + '*\\r?\\n){4,}|' + BK + '{17,}';
const pad = (m, n = m.split('\n').length - 1) =>
	el('span', { class: 'cc', title: 'padding' }, '⟨' + (n || m.length) + (n ? ' blank lines' + (m.includes('\r') ? ', CRLF' : '') : /^ +$/.test(m) ? ' spaces' : /^\t+$/.test(m) ? ' tabs' : ' blanks') + '⟩');
// txt: s as text, each special character (of re) a badge counted in count.n.
const TEXT = new RegExp(PAD + '|' + SPECIAL.source, 'g');
const LINE = new RegExp(PAD + '|[\\t\\n]|' + SPECIAL.source, 'g');
function txt(s, count, re = TEXT) {
	s = String(s);
	const f = D.createDocumentFragment();
	let last = 0;
	let m;
	re.lastIndex = 0;
	while ((m = re.exec(s))) {
		const p = m[0].length > 2; // PAD, not a character
		if (m.index > last) f.append(s.slice(last, m.index));
		f.append(p ? pad(m[0]) : badge(m[0]));
		if (p && m[0].endsWith('\n')) f.append(re === LINE ? badge('\n') : '\n');
		if (count) count.n += p ? m[0].split('\r').length - 1 : 1;
		last = m.index + m[0].length;
	}
	if (last < s.length) f.append(s.slice(last));
	return f;
}
function countSpecial(v) {
	if (typeof v === 'string') return (v.match(SPECIAL) || []).length;
	if (v && typeof v === 'object' && !isRaw(v)) {
		let n = 0;
		for (const k of Object.keys(v)) n += countSpecial(k) + countSpecial(v[k]);
		return n;
	}
	return 0;
}
// escapeSpecial: special characters as \u escapes, shown in a textarea.
const escapeSpecial = (json) =>
	json.replace(SPECIAL, (m) => Array.from(m, (_, j) => '\\u' + m.charCodeAt(j).toString(16).padStart(4, '0')).join(''));

// ---------- DOM ----------
function el(tag, props, ...kids) {
	const e = D.createElement(tag);
	if (props) {
		for (const k of Object.keys(props)) {
			const v = props[k];
			if (v == null || v === false) continue;
			if (k === 'class') e.className = v;
			else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
			else if (k === 'value') e.value = v;
			else e.setAttribute(k, v === true ? '' : v);
		}
	}
	for (const c of kids.flat(Infinity)) if (c != null && c !== false) e.append(c);
	return e;
}
const btn = (label, cls, onclick, props) => el('button', Object.assign({ type: 'button', class: 'btn ' + (cls || ''), onclick }, props), label);
const clear = (node) => node.replaceChildren();
const onCtrlEnter = (ta, f) => ta.addEventListener('keydown', (e) => e.key === 'Enter' && (e.ctrlKey || e.metaKey) && f());
const focus = (id) => $(id) && $(id).focus();
const alertP = (text, cls = '') => el('p', { class: 'error-text ' + cls, role: 'alert' }, text);
// holdFocus empties node; its result refocuses the same id once rebuilt.
function holdFocus(node) {
	const a = D.activeElement;
	const id = a && node.contains(a) ? a.id : '';
	const at = a && a.selectionStart != null ? [a.selectionStart, a.selectionEnd] : null; // not on a checkbox
	clear(node);
	return () => {
		const f = id && $(id);
		if (!f) return;
		f.focus();
		if (at && f.selectionStart != null) f.setSelectionRange(...at);
	};
}

const lines = (s) => s.split('\n').length;
const fmtN = (n) => n.toLocaleString('en-US');

// block: a text shown whole, a long one behind a fold.
function block(s, cls, count) {
	s = String(s);
	const pre = (t) => el('pre', { class: 'text ' + (cls || '') }, txt(t, count));
	const v = s.replace(TEXT, (m) => (m.length > 2 ? '⟨⟩' : m));
	const nl = lines(v);
	if (v.length <= 2000 && nl <= 40) return pre(s);
	const cut = s.slice(0, 1200).split('\n').slice(0, 20).join('\n');
	const preview = el('pre', { class: 'text preview ' + (cls || '') }, txt(cut));
	const hidden = s.length - cut.length;
	const note = el('p', { class: 'fold-note' }, '⚠ ' + fmtN(hidden) + ' more characters (' + fmtN(nl) + ' lines in all) are folded below: open them before you decide.');
	const det = el('details', { class: 'fold' }, el('summary', null, 'show all ' + fmtN(s.length) + ' characters'), pre(s));
	det.addEventListener('toggle', () => {
		preview.hidden = det.open;
		note.hidden = det.open;
	});
	return el('div', { class: 'long' }, preview, note, det);
}

// valueView: an argument value: strings as text, anything else as JSON.
function valueView(v, shell, count) {
	if (typeof v === 'string') return block(v, shell ? 'code shell' : 'code', count);
	return block(pretty(v), 'code json', count);
}

// callView: a tool's own view of a call (edits.js: Edit as a diff), or
// null; a view that fails leaves the call to the generic one.
function callView(tool, a, count) {
	const f = (globalThis.tollgateCallViews || {})[tool];
	try {
		return f ? f(a, { el, txt, count, rest: (o) => argsView(o, '', count) }) : null;
	} catch {
		return null;
	}
}
function argsView(args, tool, count) {
	const own = callView(tool, args, count);
	if (own) return own;
	const dl = el('dl', { class: 'args' });
	const keys = args && typeof args === 'object' && !Array.isArray(args) ? Object.keys(args) : null;
	if (!keys) {
		dl.append(el('dt', null, 'arguments'), el('dd', null, valueView(args, false, count)));
		return dl;
	}
	if (!keys.length) dl.append(el('dd', { class: 'muted' }, 'no arguments'));
	const SHELL = ['cmd', 'command', 'script'];
	keys.sort((x, y) => SHELL.includes(y) - SHELL.includes(x)); // the command first
	for (const k of keys) {
		const shell = SHELL.includes(k) && typeof args[k] === 'string';
		dl.append(el('dt', null, txt(k, count), shell && tool === 'bash' ? el('span', { class: 'muted' }, ' (shell)') : null),
			el('dd', null, valueView(args[k], shell, count)));
	}
	return dl;
}

// ---------- time ----------
let clockOffset = 0; // server time minus this clock, in ms
const now = () => Date.now() + clockOffset;
function clockFrom(res) {
	const d = Date.parse(res.headers.get('Date') || '');
	if (!Number.isFinite(d)) return;
	const off = d + 500 - Date.now();
	clockOffset = Math.abs(off) > 1500 ? off : 0;
}
const ms = (t) => (t ? Date.parse(t) : NaN);
function when(t) {
	const d = new Date(ms(t));
	if (isNaN(d)) return '';
	const sameDay = d.toDateString() === new Date().toDateString();
	return (sameDay ? '' : d.toLocaleDateString() + ' ') + d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}
function left(msLeft) {
	const s = Math.ceil(msLeft / 1000);
	if (s >= 3600) return Math.floor(s / 3600) + ' h ' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + ' min';
	return Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0');
}
function countdown(q) {
	const dl = ms(q.deadline);
	if (!Number.isFinite(dl)) return el('span', { class: 'countdown none' }, 'no deadline');
	const e = el('span', { class: 'countdown', 'data-deadline': String(dl) });
	tickOne(e);
	return e;
}
function tickOne(e) {
	const rest = Number(e.dataset.deadline) - now();
	const out = rest <= 0;
	const txtNow = out ? 'timed out' : left(rest) + ' left';
	if (e.textContent !== txtNow) e.textContent = txtNow;
	e.classList.toggle('urgent', !out && rest < 30000);
	e.classList.toggle('expired', out);
	return out;
}
function tick() {
	for (const e of D.querySelectorAll('.countdown[data-deadline]')) tickOne(e);
	const q = shown.q;
	if (q && q.status === 'pending' && expired(q) && !shown.expiredShown) {
		shown.expiredShown = true;
		renderDetail();
	}
}
const expired = (q) => Number.isFinite(ms(q.deadline)) && ms(q.deadline) <= now();

// ---------- API ----------
const S = { csrf: '', me: null, started: false }; // the CSRF token lives in memory only
async function api(method, path, body, headers) {
	const h = Object.assign({ Accept: 'application/json' }, headers);
	if (body !== undefined) h['Content-Type'] = 'application/json';
	if (method !== 'GET' && S.csrf) h['X-CSRF-Token'] = S.csrf;
	let res;
	let text = '';
	try {
		res = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin', cache: 'no-store' });
		text = await res.text();
	} catch (e) {
		throw new Error('the server cannot be reached');
	}
	clockFrom(res);
	let data = null;
	if (text) {
		try {
			data = parseAPI(text);
		} catch (e) {
			data = { error: { message: text.slice(0, 300) } };
		}
	}
	const err = (data && data.error) || (res.ok ? null : { code: 'http_' + res.status, message: res.statusText });
	if (res.status === 401 && path !== '/v1/session') needSignIn();
	if (err && err.code === 'csrf') needSignIn('Your session has expired: sign in again.');
	return { status: res.status, ok: res.ok, data, err };
}
// call: api, with null when the server cannot be reached.
const call = (...a) => api(...a).catch(() => null);
const enc = encodeURIComponent;
const qPath = (q) => '/v1/questions/' + enc(q.thread_id) + '/' + enc(q.id);
function randomKey() {
	const b = new Uint8Array(16);
	crypto.getRandomValues(b);
	return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// ---------- banners and toasts ----------
const banners = new Map();
function banner(id, kind, text, actions) {
	dropBanner(id);
	const b = el('div', { class: 'banner ' + kind, role: kind === 'error' ? 'alert' : 'status' }, el('span', null, text), actions || []);
	banners.set(id, b);
	$('banners').append(b);
	return b;
}
function dropBanner(id) {
	const b = banners.get(id);
	if (b) b.remove();
	banners.delete(id);
}
let toastTimer;
function toast(text) {
	const t = $('toast');
	t.textContent = text;
	t.hidden = false;
	clearTimeout(toastTimer);
	toastTimer = setTimeout(() => (t.hidden = true), 4000);
}
const announce = (text) => ($('announce').textContent = text);
// offline: a request could not reach the server; retry runs it again.
function offline(what, retry) {
	banner('net', 'error', 'The server cannot be reached: ' + what + '. Nothing you typed is lost.', [
		btn('Retry', 'small', () => {
			dropBanner('net');
			retry();
		}),
	]);
}

// ---------- session ----------
function showSignIn(msg) {
	$('signin').hidden = false;
	$('signin-error').hidden = !msg;
	$('signin-error').textContent = msg || '';
	$('signin-token').focus();
}
function needSignIn(msg) {
	if (S.me && S.me.dev_mode) return;
	S.csrf = '';
	showSignIn(msg || 'Your session has ended: sign in again. What you typed is still on the page.');
}
async function boot() {
	const r = await call('GET', '/v1/session');
	if (!r) return offline('could not load the session', boot);
	if (r.ok) return start(r.data);
	showSignIn(r.status === 401 ? '' : explain(r));
}
$('signin-form').addEventListener('submit', async (ev) => {
	ev.preventDefault();
	const input = $('signin-token');
	const token = input.value.trim();
	if (!token) return showSignIn('Paste your token first.');
	$('signin-submit').disabled = true;
	const r = await call('POST', '/v1/session', { token });
	$('signin-submit').disabled = false;
	if (!r) return showSignIn('The server cannot be reached. Try again.');
	if (!r.ok) return showSignIn(r.status === 401 ? 'This token is not known to the server.' : explain(r));
	input.value = '';
	$('signin').hidden = true;
	start(r.data);
});
$('signout').addEventListener('click', async () => {
	try {
		await api('DELETE', '/v1/session');
	} catch (e) {
		/* signed out locally all the same */
	}
	S.csrf = '';
	location.reload();
});

// The server's notices (tools unconfined, a policy loosened): a banner
// each, as GET /v1/session says now.
function showNotices(list = []) {
	const ids = list.map((n) => 'notice' + n.code + n.at);
	for (const id of banners.keys()) if (id.startsWith('notice') && !ids.includes(id)) dropBanner(id);
	list.forEach((n, i) => banners.has(ids[i]) || (banner(ids[i], n.code === 'policy_loosened' ? 'warn' : 'error', (n.at ? when(n.at) + ': ' : '') + n.message).dataset.notice = n.code));
}

function start(me) {
	S.me = me || {};
	S.csrf = S.me.csrf_token || '';
	$('signin').hidden = true;
	if (S.me.dev_mode) $('devbanner').hidden = false;
	showNotices(S.me.notices);
	if (S.me.model && !B.dataset.model) Object.assign($('model'), { textContent: 'model: ' + S.me.model, title: 'model: ' + S.me.model, hidden: false });
	const who = $('who');
	who.hidden = false;
	who.textContent = (S.me.name || '?') + (S.me.role ? ' · ' + S.me.role : '');
	$('signout').hidden = !!S.me.dev_mode;
	const nb = $('notify-btn');
	nb.hidden = !(self.Notification && Notification.permission === 'default' && can('reviewer'));
	nb.onclick = () => Notification.requestPermission().then((p) => ((nb.hidden = p !== 'default'), toast(p === 'granted' ? 'You will be told of new questions while this page is in the background.' : 'Desktop notifications are off.')));
	// No control a role cannot use: a reviewer starts no runs.
	$('new-thread-top').hidden = !can('client');
	$('history-search').hidden = !can('reviewer'); // a client's token may not search
	$('views').hidden = false;
	if (S.started) {
		resync();
		if (!es) connectStream();
		return;
	}
	S.started = true;
	$('app').hidden = false;
	if (!can('reviewer')) {
		$('queue-role').hidden = false;
		$('queue-role').textContent = 'The role “' + S.me.role + '” answers no questions: see the History.';
		if (!location.hash) history.replaceState(null, '', '#h=all');
		return route();
	}
	loadQueue().then(route);
	connectStream();
	setInterval(tick, 1000);
	setInterval(resync, 30000);
	setInterval(() => call('GET', '/v1/session').then((r) => r && r.ok && showNotices(r.data.notices)), 15000);
}
const can = (role) => !!S.me && (S.me.dev_mode || S.me.role === 'admin' || S.me.role === role);

// ---------- where the page is ----------
// The address says what is shown (q=THREAD/ID, t=THREAD, h=STATE&s=TEXT):
// a reload or a link shows it again.
const hashParams = () => new URLSearchParams(location.hash.slice(1));
function setHash(o) {
	const p = hashParams();
	p.delete('q');
	p.delete('t');
	for (const k in o) if (o[k]) p.set(k, o[k]);
	history.replaceState(null, '', '#' + p);
}
function route() {
	const p = hashParams();
	const h = p.get('h');
	$('history').hidden = !h;
	$('queue').hidden = !!h;
	$('view-queue').setAttribute('aria-current', String(!h));
	$('view-history').setAttribute('aria-current', String(!!h));
	const q = /^([^/]*)\/(.*)$/.exec(p.get('q') || '');
	$('question').hidden = !!h && !q;
	$('app').classList.toggle('hist', !!h && !q);
	if (h) loadHistory(h, p.get('s') || '');
	if (q) select(key(q[1], q[2]));
	else if (p.get('t')) {
		showThread(p.get('t'));
		if (phone()) $('thread').scrollIntoView();
	}
	else if (!h && !sel && order.length) select(order[0]);
	if (h) renderHistory();
}
window.addEventListener('hashchange', route);

// ---------- the queue ----------
const key = (t, id) => JSON.stringify([t, id]);
const qKey = (q) => key(q.thread_id, q.id);
const queue = new Map(); // key -> pending question
const gone = new Set(); // keys resolved: never shown as pending again
let order = [];
let sel = null; // selected key
const shown = { q: null, note: null, expiredShown: false }; // what the detail shows
const drafts = new Map(); // key -> what the reviewer typed and the mode
function draft(k) {
	if (!drafts.has(k)) drafts.set(k, { mode: 'view', reason: '' });
	return drafts.get(k);
}

function sortQueue() {
	// Deadlines to the second, so the calls of one turn keep their order.
	const dl = (q) => (Number.isFinite(ms(q.deadline)) ? Math.round(ms(q.deadline) / 1000) : Infinity);
	order = [...queue.keys()].sort((a, b) => dl(queue.get(a)) - dl(queue.get(b)) || numeric(a, b));
}

// numeric orders the calls of a turn as numbers: item-2 before item-10.
const numeric = (a, b) => a.localeCompare(b, 'en', { numeric: true });

let syncing = null;
async function loadQueue() {
	// The 200 soonest deadlines: the rest wait their turn.
	const r = await call('GET', '/v1/questions?status=pending&order=deadline&limit=200');
	if (!r) return offline('the queue could not be loaded', loadQueue);
	if (!r.ok) return void (r.status !== 401 && banner('queue', 'error', 'The queue could not be loaded: ' + explain(r)));
	const fresh = new Map((r.data.questions || []).map((q) => [qKey(q), q]));
	const total = r.data.total || fresh.size;
	dropBanner('queue');
	for (const k of [...queue.keys()]) if (!fresh.has(k)) removeQ(k, null);
	for (const [k, q] of fresh) if (!gone.has(k)) queue.set(k, q);
	$('queue-more').hidden = total <= queue.size;
	$('queue-more').textContent = 'Showing ' + fmtN(queue.size) + ' of ' + fmtN(total) + ' (the oldest deadlines).';
	renderQueue();
}
function resync() {
	if (!S.started || syncing) return;
	syncing = loadQueue().finally(() => (syncing = null));
}

function addQ(q, isNew) {
	const k = qKey(q);
	if (gone.has(k) || q.status !== 'pending') return;
	const had = queue.has(k);
	queue.set(k, q);
	renderQueue();
	if (isNew && !had) {
		announce('New question: ' + summary(q) + '. ' + queue.size + ' waiting.');
		// Told on the desktop, once the reviewer allowed it, when the page is not in view.
		if (D.hidden && self.Notification && Notification.permission === 'granted') new Notification('tollgate asks', { body: summary(q, 160), tag: k }).onclick = () => (focus(), pick(k));
	}
	if (!sel) select(k);
}
// removeQ: the question is no longer pending; info says how it ended.
function removeQ(k, info) {
	gone.add(k);
	const was = queue.delete(k);
	if (was) renderQueue();
	if (k === sel && shown.q && info && !shown.mine && !(drafts.get(k) || {}).busy) {
		shown.note = info;
		renderDetail();
	}
}

// gist: a question's first line; more: what it leaves out.
function gist(q) {
	const p = q.payload || {};
	const a = p.args || p.arguments || {};
	const k = !['ask', 'confirm'].includes(q.kind) && typeof a === 'object' && gistKeys.find((k) => typeof a[k] === 'string');
	const s = q.kind === 'ask' ? p.question || '' : q.kind === 'confirm' ? p.message || '' : k ? a[k] : typeof a === 'object' ? JSON.stringify(a) : String(a);
	const n = lines(s.trimEnd()) - 1;
	const o = k ? Object.keys(a).filter((x) => x !== k && x !== 'description').length : 0;
	return { line: s.split('\n')[0], more: [n && '+' + n + ' line' + (n > 1 ? 's' : ''), o && '+' + o + ' arg' + (o > 1 ? 's' : '')].filter(Boolean).join(', ') };
}
// The argument that says what a call does: a shell's cmd (tollgate's bash,
// Codex) or command (Claude Code's Bash), a file tool's path, a fetch's
// URL, a search's query or pattern. Other calls show their JSON.
const gistKeys = ['cmd', 'command', 'file_path', 'notebook_path', 'url', 'query', 'pattern', 'path'];
// summary: max cuts the line, not the mark.
const summary = (q, max = 200, g = gist(q)) =>
	(q.kind === 'ask' || q.kind === 'confirm' ? q.kind : q.tool || (q.payload || {}).tool_name || q.kind) + ': ' + g.line.slice(0, max) + (g.more ? ' … ' + g.more : '');

// row: an item of the queue or the history: what, its state, a gist, where.
const row = (tag, props, what, state, g, meta) => el(tag, Object.assign({ class: 'qitem' }, props), el('span', { class: 'qtop' }, what, el('span', { class: 'grow' }), state),
	g == null ? null : el('span', { class: 'qsum' }, el('span', { class: 'qline' }, txt(g.line)), g.more ? el('span', { class: 'qmore' }, '… ' + g.more) : null), el('span', { class: 'qmeta' }, meta));
function renderQueue() {
	sortQueue();
	const list = $('queue-list');
	const focused = D.activeElement && D.activeElement.dataset ? D.activeElement.dataset.key : null;
	clear(list);
	for (const k of order) {
		const q = queue.get(k);
		const p = q.payload || {};
		const b = row('button', { type: 'button', 'data-key': k, 'aria-current': k === sel ? 'true' : null, onclick: (e) => (e.shiftKey ? togglePick(k, true) : pick(k)) },
			[el('span', { class: 'kind k-' + q.kind }, q.kind === 'approve' || q.kind === 'tool_interrupt' ? q.tool || p.tool_name || 'tool' : q.kind),
				hiddenChars(q) ? el('span', { class: 'warn-dot', title: 'contains invisible or direction-changing characters' }, '⚠') : null],
			countdown(q), gist(q), ['thread ', txt(q.thread_id), ' · ', when(q.created_at)]);
		const box = el('input', { type: 'checkbox', class: 'qpick', checked: picked.has(k), 'aria-label': 'select ' + summary(q, 60), onchange: () => togglePick(k) });
		list.append(el('li', { class: picked.has(k) ? 'picked' : null }, box, b));
	}
	renderBulk();
	const n = queue.size;
	$('count').textContent = n ? '(' + n + ')' : '';
	$('queue-empty').hidden = n > 0;
	D.title = (n ? '(' + n + ') ' : '') + 'tollgate';
	// The tab's icon carries the count too.
	const icon = D.querySelector('link[rel=icon]');
	icon.dataset.h ||= icon.href;
	icon.href = n ? 'data:image/svg+xml,' + encodeURIComponent('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#1f5fbf"/><circle cx="21" cy="11" r="11" fill="#c62828"/><text x="21" y="16" font-size="' + (n > 9 ? 11 : 15) + '" font-family="sans-serif" font-weight="bold" text-anchor="middle" fill="#fff">' + (n > 99 ? '99+' : n) + '</text></svg>') : icon.dataset.h;
	if (focused) {
		const f = list.querySelector('[data-key="' + CSS.escape(focused) + '"]');
		if (f) f.focus();
	}
}

// ---------- answering several at once ----------
// Picked questions are answered in one action, each by its own
// compare-and-set and digest: one answered elsewhere is refused alone.
const picked = new Set();
const bulk = { results: [], busy: false };
let lastPicked = null;
function togglePick(k, range) {
	const i = order.indexOf(lastPicked);
	const j = order.indexOf(k);
	if (range && i >= 0) for (const x of order.slice(Math.min(i, j), Math.max(i, j) + 1)) picked.add(x);
	else if (!picked.delete(k)) picked.add(k);
	lastPicked = k;
	renderQueue();
}
const hiddenChars = (q, p = q.payload || {}) => countSpecial(p.args || p.arguments || p.question || p.message || '') > 0;
// alone: why a call is not approved with others.
const alone = (q, g = gist(q)) => (hiddenChars(q) ? 'it has hidden characters' : g.more ? 'it is shown in part (' + g.more + ')' : '');
// likeKey: calls alike have the same tool, programs, effects and risks
// (a shell's command is args.cmd, or a coding agent's args.command; each
// effect names its own command after a cd or in a pipeline).
const word1 = (s) => (typeof s === 'string' ? s.trim().split(/\s/)[0] : '');
const likeKey = (q, p = q.payload || {}, a = p.args || {}, c = word1(a.cmd) || word1(a.command)) => q.kind + q.tool + c + JSON.stringify(((p.details || {}).effects || []).map((e) => e.kind + e.risk + (word1(e.command) || c)));
function renderBulk() {
	for (const k of picked) if (!queue.has(k)) picked.delete(k);
	const n = picked.size;
	$('bulk').hidden = !n && !bulk.results.length;
	$('bulk-n').textContent = n ? n + ' selected' : 'Answered together:';
	$('bulk-approve').textContent = 'Approve ' + n;
	$('bulk-deny').textContent = 'Deny ' + n + '…';
	for (const id of ['bulk-approve', 'bulk-deny', 'bulk-send-deny']) $(id).disabled = !n || bulk.busy;
	$('bulk-approve').parentNode.hidden = !n;
	const solo = [...picked].filter((k) => alone(queue.get(k))).length;
	$('bulk-alone').hidden = !solo;
	$('bulk-solo').textContent = solo;
	const ul = $('bulk-results');
	const bad = bulk.results.filter((r) => r.why);
	clear(ul);
	if (bulk.results.length) ul.append(el('li', null, (bulk.results.length - bad.length) + ' of ' + bulk.results.length + ' ' + bulk.done + (bad.length ? '; not these:' : '.')));
	for (const r of bad) ul.append(el('li', { class: 'error-text' }, '✗ ', el('code', null, txt(r.id)), ': ', txt(r.why)));
}
async function sendBulk(decision) {
	const reason = $('bulk-reason').value.trim() || DEFAULT_REASON;
	const keys = order.filter((k) => picked.has(k));
	Object.assign(bulk, { busy: true, results: [], done: past(decision) });
	shown.mine = picked.has(sel); // answered here, not elsewhere
	for (const k of keys) {
		const q = queue.get(k);
		let why = q.kind !== 'approve' && q.kind !== 'tool_interrupt' ? 'a question of kind ' + q.kind + ' is answered alone' : decision === 'approve' && alone(q) ? 'not approved: ' + alone(q) + ', so approve it alone' : '';
		const r = why ? null : await call('POST', qPath(q) + '/answer', answerBody(q, decision, reason));
		if (!why) why = !r ? 'not sent: the server cannot be reached' : r.ok ? '' : explain(r);
		if (r && (r.ok || ['already_answered', 'expired', 'aborted'].includes(r.err.code))) {
			removeQ(k, null);
			drafts.delete(k);
		}
		bulk.results.push({ id: q.id, why });
		picked.delete(k);
		renderBulk();
	}
	bulk.busy = false;
	$('bulk-deny-form').hidden = true;
	announce($('bulk-results').textContent);
	renderQueue();
	if (!queue.has(sel)) next();
}
$('bulk-approve').addEventListener('click', () => sendBulk('approve'));
$('bulk-deny').addEventListener('click', () => ($('bulk-deny-form').hidden = false, $('bulk-reason').focus()));
$('bulk-send-deny').addEventListener('click', () => sendBulk('deny'));
$('bulk-clear').addEventListener('click', () => (picked.clear(), (bulk.results = []), renderQueue()));

// pick: a queue item chosen; on a phone the question comes into view.
const phone = () => matchMedia('(max-width: 860px)').matches;
function pick(k) {
	select(k);
	if (phone()) $('question').scrollIntoView({ block: 'start' });
}
function select(k) {
	const q = queue.get(k);
	if (!q) {
		if (k && !gone.has(k)) fetchAndShow(k);
		return;
	}
	if (sel !== k) {
		const at = (shown.at = performance.now());
		D.body.dataset.keysReady = '0';
		setTimeout(() => shown.at === at && (D.body.dataset.keysReady = '1'), 700);
	}
	sel = k;
	shown.q = q;
	shown.note = null;
	shown.mine = false;
	shown.expiredShown = false;
	setHash({ q: q.thread_id + '/' + q.id });
	renderQueue();
	renderDetail();
	showThread(q.thread_id);
}
async function fetchAndShow(k) {
	const [t, id] = JSON.parse(k);
	const r = await call('GET', qPath({ thread_id: t, id }));
	if (!r || !r.ok) return;
	if (r.data.status === 'pending') return addQ(r.data, false), select(k);
	Object.assign(shown, { q: r.data, note: resolution(r.data) });
	sel = k;
	renderDetail();
	showThread(t);
}
function move(d) {
	if (!order.length) return;
	let i = order.indexOf(sel);
	i = i < 0 ? 0 : Math.min(order.length - 1, Math.max(0, i + d));
	select(order[i]);
	const b = $('queue-list').querySelector('[aria-current="true"]');
	if (b) b.scrollIntoView({ block: 'nearest' });
}
function next() {
	sel = null;
	if (order.length) select(order[0]);
	else {
		shown.q = null;
		setHash({});
		renderDetail();
	}
}

// ---------- live events ----------
let es = null;
let streamRetry = 1000;
function connectStream() {
	if (es) es.close();
	es = new EventSource('/v1/stream');
	let down = false;
	for (const t of ['question_asked', 'question_resolved', 'run_started', 'tool_result', 'run_parked', 'run_finished', 'aborted']) es.addEventListener(t, onEvent);
	es.onopen = () => {
		streamRetry = 1000;
		dropBanner('stream');
		liveState(true);
		if (down) resync();
		down = false;
	};
	es.onerror = () => {
		down = true;
		liveState(false);
		if (es.readyState === EventSource.CLOSED) {
			// Refused (signed out, restarted): check the session, try later.
			es = null;
			setTimeout(async () => {
				try {
					const r = await api('GET', '/v1/session');
					if (r.ok) connectStream();
				} catch (e) {
					setTimeout(connectStream, streamRetry);
				}
			}, streamRetry);
			streamRetry = Math.min(streamRetry * 2, 30000);
		}
	};
}
function liveState(up) {
	const e = $('live-state');
	e.hidden = false;
	e.textContent = up ? 'live' : 'reconnecting…';
	e.classList.toggle('down', !up);
	if (!up) banner('stream', 'warn', 'Live updates are interrupted; reconnecting. The queue may be out of date.');
}
function onEvent(msg) {
	let ev;
	try {
		ev = parseAPI(msg.data);
	} catch (e) {
		return;
	}
	const type = ev.type || msg.type;
	const t = ev.thread_id;
	const d = ev.data || {};
	if (type === 'question_asked' && d.question_id) {
		api('GET', qPath({ thread_id: t, id: d.question_id })).then((r) => r.ok && addQ(r.data, true), () => resync());
	} else if (type === 'question_resolved') {
		if (d.question_id) removeQ(key(t, d.question_id), { by: d.by, status: d.status, decision: d.decision, reason: d.reason, at: ev.at });
	} else if (type === 'aborted') {
		for (const k of [...queue.keys()]) if (queue.get(k).thread_id === t) removeQ(k, { status: 'aborted', reason: d.reason, at: ev.at, by: 'abort' });
		resync();
	} else if (type === 'run_finished' || type === 'run_parked') resync();
	if (t && t === thread.id) refreshThreadSoon();
}

// ---------- explaining errors ----------
function resolution(q) {
	if (!q) return null;
	let decision = '';
	if (q.answer && typeof q.answer === 'object') decision = q.answer.decision || q.answer.action || '';
	return { by: q.answered_by, status: q.status, decision, reason: q.reason || (q.answer || {}).reason, at: q.resolved_at };
}
const PAST = { approve: 'approved', deny: 'denied', reject: 'denied', edit: 'edited' };
const past = (d) => (Object.hasOwn(PAST, d) ? PAST[d] : d);
function describeResolution(n) {
	const by = n.by ? ' by ' + n.by : '';
	const at = n.at ? ' at ' + when(n.at) : '';
	if (n.status === 'timed_out') return 'This question timed out' + at + ': nobody answered in time, and the model was told so.';
	if (n.status === 'aborted') return 'This question was aborted' + at + (n.reason ? ': ' + n.reason : '') + '. Its run was stopped.';
	const dec = n.decision ? ' (' + past(n.decision) + ')' : '';
	return 'This question was answered' + by + at + dec + (n.reason ? ': “' + n.reason + '”' : '') + '.';
}
const WHY = {
	expired: 'Too late: this question timed out; the model was told nobody answered.',
	aborted: 'This question was aborted: its run was stopped.',
	digest_mismatch: 'The call changed since it was shown here: look at it again before you answer.',
	csrf: 'Your session has expired: sign in again.',
	run_active: "This thread's run is still going: answer its questions or abort it.",
	too_large: 'That is too large for the server (over 1 MiB).',
	unavailable: 'The server is not taking requests (shutting down, or its store is unreachable): try again soon.',
};
function explain(r) {
	const e = r.err || {};
	const m = e.message ? ': ' + e.message : '.';
	if (e.code === 'already_answered') return describeResolution(resolution(e.question || (r.data && r.data.question)) || {});
	if (e.code === 'forbidden') return 'You may not do this' + (S.me && S.me.role ? ' with the role “' + S.me.role + '”' : '') + m;
	if (e.code === 'invalid_answer') return 'The server refused this answer' + m;
	if (Object.hasOwn(WHY, e.code)) return WHY[e.code];
	if (r.status >= 500) return 'Try again: the server failed to record it' + m;
	return (e.message || 'The server said ' + r.status) + '.';
}

// ---------- the selected question ----------
function renderDetail() {
	const pane = $('question');
	const refocus = holdFocus(pane);
	const q = shown.q;
	if (!q) return pane.append(el('div', { class: 'placeholder' }, el('h2', null, 'Nothing to review'), el('p', { class: 'muted' }, 'Questions that wait for a person appear in the queue as they are asked.')));
	const k = qKey(q);
	const dr = draft(k);
	const p = q.payload || {};
	const kind = q.kind || p.kind;
	const count = { n: 0 };
	const tool = q.tool || p.tool_name || '';
	const open = q.status === 'pending' && !shown.note && !expired(q);

	const st = (shown.note && shown.note.status) || q.status;
	const head = el('div', { class: 'qhead' },
		el('h2', { class: 'qtitle' }, kind === 'approve' || kind === 'tool_interrupt' ? ['Run ', el('code', null, txt(tool || '?')), '?'] : kind === 'confirm' ? 'Confirm' : 'Question for you'),
		// An answered question's clock has stopped.
		st === 'pending' ? countdown(q) : el('span', { class: 'countdown none' }, st.replace('_', ' ')));
	const meta = el('p', { class: 'qmeta' }, kind, ' · thread ', el('code', null, txt(q.thread_id)), ' · ', el('code', null, txt(q.id)), ' · asked ', when(q.created_at));
	const content = el('div', { class: 'qbody' });
	const warnSlot = el('div');
	pane.append(head, meta, warnSlot);
	if (shown.note) pane.append(el('p', { class: 'notice', role: 'status' }, describeResolution(shown.note), ' ', btn('Next question', 'small', next)));
	else if (q.status === 'pending' && expired(q)) pane.append(el('p', { class: 'notice expired-note', role: 'status' }, 'Timed out: the call was refused, and the model is told nobody answered in time.'));
	pane.append(content);

	if (kind === 'approve' || kind === 'tool_interrupt') {
		const args = kind === 'approve' ? p.args : p.arguments;
		content.append(argsView(args || {}, tool, count), factsView(p.details || {}, count));
		const like = open ? order.filter((x) => queue.get(x).thread_id === q.thread_id && likeKey(queue.get(x)) === likeKey(q)) : [];
		if (like.length > 1) content.append(btn('Select all ' + like.length + ' like this in this thread', 'small', () => (like.forEach((x) => picked.add(x)), renderQueue(), focus('bulk-approve')), { id: 'select-like' }));
		content.append(approveActions(q, dr, args || {}, open, kind));
	} else if (kind === 'confirm') content.append(block(p.message || '', 'prose', count), yesNo(q, open));
	else if (kind === 'ask') content.append(block(p.question || '', 'prose', count), askActions(q, dr, open));
	else {
		content.append(el('p', { class: 'muted' }, 'A question of kind “', txt(kind || '?'), '”. Its payload:'), valueView(p, false, count), yesNo(q, open, true));
	}
	// A question read from the history has nothing to answer.
	if (q.status !== 'pending') for (const a of content.querySelectorAll('.answer')) a.remove();
	if (count.n) {
		warnSlot.append(el('p', { class: 'warning', role: 'alert' }, '⚠ This call contains invisible or direction-changing characters (' + count.n + ', shown as ⟨U+…⟩). What you see may not be what runs: read it carefully.'));
	}
	shown.warn = count.n;
	if (dr.error) pane.append(alertP(dr.error, 'answer-error'));
	refocus();
}

// factsView: what the policy says of the call: why, risk, effects, where
// it runs, and what an MCP server says of its tool (its word).
function factsView(d, count) {
	d = Object.assign({}, d);
	const runs = !!d.runs;
	const dl = el('dl', { class: 'facts' });
	const t = (v) => txt(typeof v === 'string' ? v : JSON.stringify(v), count);
	const list = (l, f) => el('ul', { class: 'flist' }, [].concat(l).map((x) => el('li', null, f(x))));
	const add = (label, name, f = t) => {
		if (d[name] != null) dl.append(el('dt', null, label), el('dd', { class: 'f-' + name }, f(d[name])));
		delete d[name];
	};
	if (d.why) delete d.matched_rule;
	if ([].concat(d.review || []).every((r) => (d.why || '').includes(r))) delete d.review;
	if (d.dir != null && d.dir === d.cwd) delete d.dir; // a hook's call: the agent's cwd is where the answer holds
	add('why', 'why');
	add('rule', 'matched_rule');
	add('risk', 'risk', (r) => el('span', { class: 'risk r-' + r }, t(r)));
	add('it will', 'effects', (l) => list(l, (e) => (e && e.text ? [el('span', { class: 'risk r-' + e.risk, title: e.risk + ' risk' }, e.risk), ' ', txt(e.text, count)] : t(e))));
	add('runs', 'runs');
	add('impact', 'impact');
	add('review', 'review', (l) => list(l, t));
	add('policy error', 'policy_error');
	const a = Object.assign({}, d.annotations);
	const said = ['read_only', 'destructive', 'idempotent', 'open_world'].filter((k) => a[k] === true).map((k) => k.replace('_', '-'));
	if (d.mcp_server || a.mcp_server) d.mcp = ['tool ', el('code', null, t(d.mcp_tool || a.mcp_tool || '?')), ' of the MCP server ', el('code', null, t(d.mcp_server || a.mcp_server)), d.mcp_client ? [' for the client ', t(d.mcp_client)] : ''];
	if (a.title || a.description) d.described = [a.title ? el('strong', null, t(a.title)) : '', a.title && a.description ? ' — ' : '', a.description ? t(a.description) : ''];
	if (said.length) d.says = said.join(', ') + ' (its word, not checked)';
	for (const k of ['mcp_server', 'mcp_tool', 'mcp_client', 'annotations']) delete d[k];
	for (const k of ['title', 'description', 'mcp_server', 'mcp_tool', 'read_only', 'destructive', 'idempotent', 'open_world', ...(runs ? ['working_directory', 'sandbox'] : [])]) delete a[k];
	const same = (x) => x;
	add('MCP', 'mcp', same);
	add('the tool', 'described', same);
	add('the server says', 'says');
	Object.assign(d, a);
	for (const k in d) add(txt(k), k, (v) => (JSON.stringify(v).length < 120 ? t(v) : valueView(v, false, count)));
	return dl;
}

// send: post an answer; on failure what was typed stays.
async function send(q, body, doneText, onProblems) {
	const k = qKey(q);
	const dr = draft(k);
	if (dr.busy) return;
	dr.busy = true;
	dr.error = null;
	for (const b of $('question').querySelectorAll('button[data-act]')) b.disabled = true;
	const r = await call('POST', qPath(q) + '/answer', body);
	if (!r) {
		dr.busy = false;
		renderDetail();
		offline('your answer was not sent', () => send(q, body, doneText, onProblems));
		return;
	}
	dr.busy = false;
	if (r.ok) {
		shown.mine = true;
		dropBanner('net');
		removeQ(k, null);
		drafts.delete(k);
		toast(doneText + (queue.size ? ' ' + queue.size + ' still waiting.' : ' Nothing else is waiting.'));
		announce(doneText);
		if (sel === k) next();
		return;
	}
	const code = r.err && r.err.code;
	if (code === 'invalid_answer' && onProblems) return onProblems(r.err.problems || [], r.err.message);
	if (code === 'already_answered' || code === 'expired' || code === 'aborted') {
		const info = code === 'already_answered' ? resolution(r.err.question || r.data.question) || {} : { status: code === 'expired' ? 'timed_out' : 'aborted', at: null };
		removeQ(k, null);
		shown.note = info;
		if (code === 'already_answered' && !info.by) dr.error = explain(r);
	} else if (code === 'digest_mismatch') {
		dr.error = explain(r);
		api('GET', qPath(q)).then((g) => {
			if (g.ok && sel === k) {
				shown.q = g.data;
				if (g.data.status === 'pending') queue.set(k, g.data);
				renderDetail();
			}
		}, () => {});
	} else dr.error = explain(r);
	renderDetail();
}

function actionBar(open, ...buttons) {
	const bar = el('div', { class: 'actions' }, buttons);
	if (!open) for (const b of bar.querySelectorAll('button')) b.disabled = true;
	return bar;
}

const DEFAULT_REASON = 'The reviewer denied this call and gave no reason.';
// answerBody: an answer as the question's kind takes it: hitl's, bound
// to the digest of the call shown, or interrupt's.
const answerBody = (q, decision, x) => (q.kind === 'approve'
	? { decision, digest: q.digest || undefined, reason: decision === 'deny' ? x : undefined, edited_args: decision === 'edit' ? x : undefined }
	: { action: decision === 'deny' ? 'reject' : decision, digest: q.digest || undefined, message: decision === 'deny' ? x : undefined, arguments: decision === 'edit' ? x : undefined });

function approveActions(q, dr, args, open, kind) {
	const k = qKey(q);
	const wrap = el('div', { class: 'answer' });
	const doApprove = () => {
		if (shown.warn && !dr.armed) {
			dr.armed = true;
			renderDetail();
			$('act-approve').focus();
			return;
		}
		send(q, answerBody(q, 'approve'), 'Approved.');
	};
	const mode = dr.mode;
	const approveBtn = btn(dr.armed ? 'Approve despite the hidden characters' : 'Approve', 'primary' + (dr.armed ? ' danger' : ''), doApprove, { id: 'act-approve', 'data-act': 'approve', 'aria-keyshortcuts': 'a' });
	const denyBtn = btn('Deny…', 'deny', () => setMode(k, 'deny'), { id: 'act-deny', 'data-act': 'deny', 'aria-keyshortcuts': 'd', 'aria-expanded': String(mode === 'deny') });
	const editBtn = btn('Edit…', '', () => setMode(k, 'edit'), { id: 'act-edit', 'data-act': 'edit', 'aria-keyshortcuts': 'e', 'aria-expanded': String(mode === 'edit' || mode === 'diff') });
	// While the deny or edit form is open only its own buttons answer.
	wrap.append(actionBar(open && mode === 'view', approveBtn, denyBtn, editBtn));

	if (mode === 'deny') {
		const ta = el('textarea', { id: 'deny-reason', rows: '3', class: 'reason', placeholder: 'Why not, or what to do instead: “list the files first”', value: dr.reason,
			oninput: (e) => (dr.reason = e.target.value) });
		onCtrlEnter(ta, () => sendDeny());
		const sendDeny = () => {
			send(q, answerBody(q, 'deny', dr.reason.trim() || DEFAULT_REASON), 'Denied; the model is told why.');
		};
		wrap.append(el('div', { class: 'subform' },
			el('label', { for: 'deny-reason' }, 'Reason — the model will read this'), ta,
			el('p', { class: 'hint' }, 'Left empty, the model reads: “' + DEFAULT_REASON + '” Ctrl+Enter sends.'),
			actionBar(open, btn('Deny and tell the model', 'deny', sendDeny, { 'data-act': 'send-deny', id: 'send-deny' }), btn('Cancel', '', () => setMode(k, 'view'), { id: 'cancel-deny' }))));
	}
	if (mode === 'edit' || mode === 'diff') wrap.append(editForm(q, dr, args, open, kind));
	return wrap;
}

function setMode(k, mode) {
	const dr = draft(k);
	dr.mode = mode;
	dr.error = null;
	renderDetail();
	focus({ deny: 'deny-reason', edit: 'edit-json', diff: 'send-edit', view: 'act-approve' }[mode]);
}

function editForm(q, dr, args, open, kind) {
	const k = qKey(q);
	if (dr.edit == null) dr.edit = escapeSpecial(pretty(args));
	const box = el('div', { class: 'subform editor' });
	let edited;
	try {
		edited = dr.mode === 'diff' ? parseJSON(dr.edit) : undefined;
	} catch (e) {
		dr.mode = 'edit';
	}
	if (dr.mode === 'diff') {
		const sendEdit = () =>
			send(q, answerBody(q, 'edit', edited), 'Sent with your edits.', (problems, message) => {
				dr.mode = 'edit';
				dr.problems = { list: problems, message };
				renderDetail();
				focus('edit-json');
			});
		const same = canon(edited) === canon(args);
		box.append(el('h3', null, 'Check your changes'), same ? el('p', { class: 'hint' }, 'Nothing changed: the call would run as asked.') : diffView(args, edited, kind === 'tool_interrupt'),
			actionBar(open, btn(same ? 'Send unchanged' : 'Send the edited call', 'primary', sendEdit, { 'data-act': 'send-edit', id: 'send-edit' }), btn('Back to editing', '', () => setMode(k, 'edit'), { id: 'back-edit' })));
		return box;
	}
	const status = el('div', { id: 'edit-status', class: 'edit-status', 'aria-live': 'polite' });
	const ta = el('textarea', { id: 'edit-json', class: 'code-edit', rows: String(Math.min(24, Math.max(6, lines(dr.edit) + 1))), spellcheck: 'false', autocapitalize: 'off', autocomplete: 'off', 'aria-describedby': 'edit-status edit-problems', value: dr.edit });
	const check = () => {
		clear(status);
		try {
			const v = parseJSON(dr.edit);
			if (!v || typeof v !== 'object' || Array.isArray(v)) throw Object.assign(new SyntaxError('the arguments must be a JSON object: { "name": value, … }'), { pos: 0 });
			status.className = 'edit-status ok';
			status.append('Valid JSON.');
			return v;
		} catch (e) {
			status.className = 'edit-status bad';
			status.append(jsonError(dr.edit, e));
			return undefined;
		}
	};
	let timer;
	ta.addEventListener('input', () => {
		dr.edit = ta.value;
		clearTimeout(timer);
		timer = setTimeout(check, 250);
	});
	const review = () => {
		dr.edit = ta.value;
		if (check() === undefined) return ta.focus();
		setMode(k, 'diff');
	};
	onCtrlEnter(ta, review);
	const probs = dr.problems ? problemsView({ list: dr.problems.list, message: 'The server refused these arguments' + (dr.problems.list.length ? ':' : dr.problems.message ? ': ' + dr.problems.message : '.') }, '(the whole arguments)') : '';
	box.append(el('label', { for: 'edit-json' }, 'Arguments as JSON — edit, then review the changes before sending'), ta, status, probs,
		el('p', { class: 'hint' }, kind === 'tool_interrupt' ? 'Keys you give replace the call’s own; a key you delete keeps its old value.' : 'Invisible characters are written as \\u escapes. Ctrl+Enter reviews.'),
		actionBar(open, btn('Review changes', 'primary', review, { 'data-act': 'review', id: 'review-edit' }), btn('Reset', '', () => {
			dr.edit = escapeSpecial(pretty(args));
			dr.problems = null;
			renderDetail();
		}), btn('Cancel', '', () => setMode(k, 'view'), { id: 'cancel-edit' })));
	if (dr.edit !== escapeSpecial(pretty(args)) || dr.problems) setTimeout(check, 0);
	return box;
}

// diffView: key by key; a changed value line by line.
function diffView(a, b, merge) {
	const out = el('div', { class: 'diff', 'aria-label': 'Changes' });
	const keys = [...Object.keys(a), ...Object.keys(b).filter((x) => !Object.hasOwn(a, x))];
	const same = [];
	const row = (sign, text) => el('div', { class: 'd ' + (sign === '+' ? 'add' : sign === '-' ? 'del' : 'ctx') }, el('span', { class: 'sign', 'aria-label': sign === '+' ? 'added' : sign === '-' ? 'removed' : '' }, sign), txt(text));
	const asText = (v) => (typeof v === 'string' ? v : pretty(v));
	for (const k of keys) {
		const inA = Object.hasOwn(a, k);
		const inB = Object.hasOwn(b, k);
		if (inA && inB && canon(a[k]) === canon(b[k])) {
			same.push(k);
			continue;
		}
		const sec = el('div', { class: 'dkey' }, el('div', { class: 'dname' }, txt(k), inA && !inB ? (merge ? ' — removed here, but it keeps its old value (edits are merged)' : ' — removed') : !inA ? ' — added' : ' — changed'));
		for (const [sign, line] of lineDiff(inA ? asText(a[k]) : null, inB ? asText(b[k]) : null)) sec.append(row(sign, line));
		out.append(sec);
	}
	if (same.length) out.append(el('p', { class: 'muted' }, 'unchanged: ', same.map((s, i) => [i ? ', ' : '', el('code', null, txt(s))])));
	return out;
}
// lineDiff: shared lines at both ends, those between removed and added.
function lineDiff(x, y) {
	const A = x == null ? [] : x.split('\n');
	const Bl = y == null ? [] : y.split('\n');
	let s = 0;
	while (s < A.length && s < Bl.length && A[s] === Bl[s]) s++;
	let e = 0;
	while (e < A.length - s && e < Bl.length - s && A[A.length - 1 - e] === Bl[Bl.length - 1 - e]) e++;
	const ctx = (l) => l.map((t) => [' ', t]);
	return [...ctx(A.slice(Math.max(0, s - 2), s)), ...A.slice(s, A.length - e).map((t) => ['-', t]), ...Bl.slice(s, Bl.length - e).map((t) => ['+', t]), ...ctx(A.slice(A.length - e, A.length - e + 2))];
}

// yesNo: a confirm question's yes and no (raw: true and false).
const yesNo = (q, open, raw) => el('div', { class: 'answer' }, actionBar(open,
	btn(raw ? 'Answer yes (true)' : 'Yes', 'primary', () => send(q, raw || { yes: true }, 'Answered yes.'), { id: 'act-approve', 'data-act': 'approve', 'aria-keyshortcuts': raw ? null : 'a' }),
	btn(raw ? 'Answer no (false)' : 'No', 'deny', () => send(q, raw ? false : { yes: false }, 'Answered no.'), { id: 'act-deny', 'data-act': 'deny', 'aria-keyshortcuts': raw ? null : 'd' })));

// askActions: choices as buttons; else an answer in words, or as JSON for
// a form's schema (the server checks it, and says what is wrong).
function askActions(q, dr, open) {
	const p = q.payload || {};
	const onProblems = (list, message) => {
		dr.problems = { list, message };
		renderDetail();
	};
	if (Array.isArray(p.choices) && p.choices.length) {
		return el('div', { class: 'answer' }, el('p', { class: 'hint' }, 'Choose one:'),
			actionBar(open, p.choices.map((c, i) => btn(txt(c), i ? '' : 'primary', () => send(q, c, 'Answered.'), { 'data-act': 'choice', id: i ? null : 'act-approve' }))));
	}
	const schema = p.schema && typeof p.schema === 'object' ? p.schema : null;
	const id = schema ? 'answer-json' : 'answer-text';
	if (dr.text === undefined) dr.text = schema ? '{\n  \n}' : '';
	const form = el('form', { class: 'subform', novalidate: true }, el('label', { for: id }, schema ? 'Your answer as JSON' : 'Your answer'),
		schema ? el('details', null, el('summary', null, 'the form’s schema'), block(pretty(schema), 'code json')) : null,
		el('textarea', { id, rows: schema ? '8' : '4', class: schema ? 'code-edit' : null, spellcheck: schema ? 'false' : null, value: dr.text, oninput: (e) => (dr.text = e.target.value) }));
	form.addEventListener('submit', (e) => {
		e.preventDefault();
		if (!schema) return dr.text.trim() ? send(q, dr.text, 'Answered.', onProblems) : onProblems([], 'Write an answer first');
		try {
			send(q, parseJSON(dr.text), 'Answered.', onProblems);
		} catch (err) {
			onProblems([], jsonError(dr.text, err));
		}
	});
	if (dr.problems) form.append(problemsView(dr.problems, '(the answer)'));
	form.append(actionBar(open, el('button', { type: 'submit', class: 'btn primary', 'data-act': 'send-answer', id: 'act-approve' }, 'Send answer')));
	return el('div', { class: 'answer' }, form);
}

function problemsView(pr, whole) {
	const ul = el('ul');
	for (const x of pr.list) ul.append(el('li', null, el('code', null, txt(x.path || whole)), ' ', txt(x.message || '')));
	return el('div', { id: 'edit-problems', class: 'problems', role: 'alert' }, el('p', null, txt(pr.message || 'The server refused this answer')), pr.list.length ? ul : null);
}
function jsonError(src, e) {
	const before = src.slice(0, e.pos || 0);
	return 'Invalid JSON at line ' + before.split('\n').length + ', column ' + (before.length - before.lastIndexOf('\n')) + ': ' + e.message;
}

// ---------- the conversation ----------
const thread = { id: '', events: [], after: 0, mode: 'view' };
const composed = new Map(); // thread id -> message being written
function showThread(id) {
	// A new thread being written keeps the form; the question waits.
	if (thread.mode === 'new') return void (thread.nextId = id);
	if (thread.id === id) return;
	if (thread.id) composed.set(thread.id, $('compose').value);
	$('compose').value = composed.get(id) || '';
	Object.assign(thread, { id, data: null, events: [], after: 0, mode: 'view', error: null, composeError: null });
	renderThread();
	refreshThread();
}
function refreshThreadSoon() {
	clearTimeout(thread.timer);
	thread.timer = setTimeout(refreshThread, 150);
}
async function refreshThread() {
	const id = thread.id;
	if (!id) return;
	if (thread.busy) return void (thread.again = true);
	thread.busy = true;
	try {
		const r = await api('GET', '/v1/threads/' + enc(id));
		if (id !== thread.id) return;
		if (!r.ok) thread.error = r.status === 404 ? 'This thread does not exist (yet).' : explain(r);
		else {
			thread.data = r.data;
			thread.error = null;
			for (let page = 0; page < 20; page++) {
				const ev = await api('GET', '/v1/threads/' + enc(id) + '/events?after=' + thread.after + '&limit=500');
				if (!ev.ok || id !== thread.id) break;
				const list = ev.data.events || [];
				thread.events.push(...list);
				if (list.length) thread.after = list[list.length - 1].seq;
				if (ev.data.next_after) thread.after = Math.max(thread.after, ev.data.next_after);
				if (list.length < 500) break;
			}
		}
		renderThread();
	} catch (e) {
		thread.error = 'The conversation could not be loaded: the server cannot be reached.';
		renderThread();
	} finally {
		thread.busy = false;
		if (thread.again) {
			thread.again = false;
			refreshThreadSoon();
		}
	}
}

const STATES = { parked: 'waiting for answers', active: 'running', failed: 'failed', idle: 'finished', running: 'running' };

// ---------- the history ----------
const hist = { state: '', s: '', next: '', items: [] };
async function loadHistory(state, s, more) {
	$('history-q').value = s;
	if (!more) {
		if (hist.state === state && hist.s === s && !hist.error) return renderHistory();
		Object.assign(hist, { state, s, next: '', items: [], error: null });
	}
	const answered = state === 'answered';
	const path = answered ? '/v1/questions?status=answered&order=newest' + (s ? '&thread=' + enc(s) : '') : '/v1/threads?' + (state !== 'all' ? 'state=' + enc(state) : '') + (s ? '&q=' + enc(s) : '');
	const r = await call('GET', path + '&limit=50' + (hist.next ? '&cursor=' + enc(hist.next) : ''));
	if (hist.state !== state || hist.s !== s) return;
	hist.error = !r ? 'The server cannot be reached.' : r.ok ? null : explain(r);
	if (r && r.ok) {
		hist.items.push(...(answered ? r.data.questions : r.data.threads));
		hist.next = r.data.next_cursor || '';
	}
	renderHistory();
}
const histHash = (o, h = hist.state, s = hist.s) => '#' + new URLSearchParams(Object.assign({ h }, s ? { s } : {}, o));
function renderHistory() {
	const list = $('history-list');
	clear(list);
	for (const a of $('history').querySelectorAll('[data-state]')) a.setAttribute('aria-selected', String(a.dataset.state === hist.state));
	for (const x of hist.items) {
		const n = resolution(x);
		list.append(el('li', null, x.run_state
			? row('a', { href: histHash({ t: x.id }), 'aria-current': x.id === thread.id ? 'true' : null }, el('code', { class: 'kind' }, txt(x.id)),
				el('span', { class: 'chip st-' + x.run_state }, STATES[x.run_state] || x.run_state), null, ['updated ', when(x.updated_at)])
			: row('a', { href: histHash({ q: x.thread_id + '/' + x.id }) }, el('span', { class: 'kind' }, txt(x.tool || x.kind)),
				el('span', { class: 'tag ' + (n.decision === 'approve' ? 'ok' : 'stop') }, past(n.decision) || x.status), gist(x),
				[txt(x.thread_id), ' · ', txt(n.by || '?'), ' after ', dur(ms(n.at) - ms(x.created_at)), ' · ', when(n.at)])));
	}
	$('history-empty').hidden = hist.items.length > 0 || !!hist.error;
	$('history-more').hidden = !hist.next;
	if (hist.error) list.append(alertP(hist.error));
}
$('history-more').addEventListener('click', () => loadHistory(hist.state, hist.s, true));
$('history-search').addEventListener('submit', (e) => {
	e.preventDefault();
	location.hash = histHash({}, hist.state || 'all', $('history-q').value.trim());
});

// shellView: a bash result as exit code, stdout, stderr; null otherwise.
function shellView(c) {
	let o;
	try {
		o = JSON.parse(c);
	} catch (e) {}
	if (!o || typeof o.exit_code !== 'number' || typeof o.stdout + typeof o.stderr !== 'stringstring') return null;
	const out = (name) => o[name] && [el('div', { class: 'olabel' }, name), block(o[name], 'code out ' + name)];
	return el('div', null, el('div', { class: 'exit' + (o.exit_code || o.timed_out ? ' bad' : '') }, o.timed_out ? 'timed out' : 'exit ' + o.exit_code, o.truncated ? ' · output truncated' : ''),
		out('stdout'), out('stderr'), o.stdout || o.stderr ? null : el('div', { class: 'muted' }, 'no output'));
}

function entry(cls, who, at, ...kids) {
	return el('li', { class: 'msg ' + cls }, el('div', { class: 'mhead' }, el('span', { class: 'mwho' }, who), el('span', { class: 'grow' }), el('time', null, when(at))), kids);
}
function messageView(m) {
	if (m.role === 'user') return entry('user', 'user', m.created_at, block(m.text || '', 'prose'));
	if (m.role === 'assistant') {
		const calls = (m.tool_calls || []).map((c) => {
			const a = c.arguments;
			const onlyCmd = a && typeof a === 'object' && Object.keys(a).length === 1 && typeof a.cmd === 'string';
			return el('div', { class: 'call' }, el('div', { class: 'cname' }, '→ ', el('code', null, txt(c.name)), el('span', { class: 'muted' }, ' ', txt(c.id))), callView(c.name, a) || (onlyCmd ? block(a.cmd, 'code shell') : valueView(a, false)));
		});
		const cls = m.stop_reason === 'aborted' || m.stop_reason === 'error' ? 'assistant stopped' : 'assistant';
		return entry(cls, 'assistant', m.created_at, m.text ? block(m.text, 'prose') : null, calls);
	}
	if (m.role === 'tool' && m.result) {
		const r = m.result;
		// What happened to the call, as the server (internal/display.Outcome)
		// and the command line say it: a policy block is never "denied".
		const said = (thread.data.outcomes || {})[r.call_id] || '';
		const kind = /^outcome/.test(said) ? 'error' : /^(blocked|denied|timed|aborted|refused)/.test(said) ? 'stop' : /^edited/.test(said) ? 'edit' : 'ok';
		return entry('tool' + (r.is_error ? ' error' : ''), 'result of ' + (r.tool_name || 'tool'), m.created_at,
			el('div', { class: 'rmeta' }, said ? el('span', { class: 'tag ' + kind }, txt(said, null, LINE)) : r.is_error ? el('span', { class: 'tag error' }, 'error') : null, el('span', { class: 'muted' }, txt(r.call_id || '')),
				// Each call's own times: a turn's calls start and end apart.
				r.started_at ? el('span', { class: 'rtime' }, 'started ', when(r.started_at), ', took ', dur(ms(r.ended_at) - ms(r.started_at))) : null),
			(!r.is_error && shellView(r.content)) || block(r.content || '', 'code out'));
	}
	return entry('other', m.role || '?', m.created_at, valueView(m, false));
}
// dur: a duration in words.
function dur(d) {
	if (!(d >= 0)) return '?';
	if (d < 60000) return d < 1000 ? Math.round(d) + ' ms' : (d / 1000).toFixed(1) + ' s';
	const m = Math.round(d / 60000);
	return m < 60 ? m + ' min' : Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
}
// openCallView: a call of the turn in progress: its result, or running.
function openCallView(c) {
	if (c.state === 'done' && c.result) return messageView({ role: 'tool', result: c.result, created_at: c.result.ended_at });
	if (c.state === 'running') return el('li', { class: 'msg event running' }, el('span', null, '… ', txt(c.tool), ' ', txt(c.call_id), ' running since ', when(c.started_at)));
	return null;
}
// evWords: a log entry in words (the audit log, and the conversation).
// ranWords: what an agent reported running; a call tollgate did not let
// through (a forged report, or a call run without its leave) says so.
const ranWords = (d) => (d.not_allowed ? '⚠ ' : '') + (d.agent || 'the agent') + (d.not_allowed ? ' reports it ran ' + d.tool + ', which tollgate did not allow: ' + d.not_allowed : ' ran ' + d.tool);
function evWords(ev) {
	const d = ev.data || {};
	const dec = past(d.decision);
	const q = d.question_id || 'question';
	const w = {
		question_resolved: () => (d.status === 'timed_out' ? '⏱ ' + q + ' timed out: nobody answered' : d.status === 'aborted' ? '⏹ ' + q + ' aborted' : (dec === 'denied' ? '✗ ' : '✓ ') + (d.by || 'someone') + ' ' + (dec || 'answered') + ' ' + q) +
			(d.latency_ms != null ? ' after ' + dur(d.latency_ms) : '') + (d.reason ? ': “' + d.reason + '”' : ''),
		aborted: () => '⏹ run aborted' + (d.reason ? ': ' + d.reason : ''),
		run_finished: () => (d.error ? '⚠ run stopped with an error: ' + d.error : 'run finished'),
		tool_output: () => ranWords(d) + ' ' + (d.call_id || ''),
		tool_result: () => d.tool + ' ' + d.call_id + (d.is_error ? ': error' : ': ran') + (d.hitl && d.hitl.decision ? ' (' + d.hitl.decision + ')' : ''),
	}[ev.type];
	return w ? w() : JSON.stringify(d).slice(0, 200);
}
const auditLine = (ev) => el('li', null, el('time', null, when(ev.at)), ' ', el('code', null, txt(ev.type)), ' ', txt(evWords(ev)), ev.data && ev.data.digest ? el('span', { class: 'muted', title: ev.data.digest }, ' · digest ' + String(ev.data.digest).slice(0, 15) + '…') : '');
function eventView(ev) {
	const d = ev.data || {};
	if (ev.type === 'tool_output') return entry('output' + (d.not_allowed ? ' ev-stop' : ''), ranWords(d), ev.at, block(d.output, 'code'));
	if (ev.type !== 'question_resolved' && ev.type !== 'aborted' && !(ev.type === 'run_finished' && d.error)) return null;
	return el('li', { class: 'msg event' + (ev.type === 'question_resolved' && d.status === 'answered' ? '' : ' ev-stop') }, el('span', null, txt(evWords(ev))), el('time', null, when(ev.at)));
}
function timeline() {
	const res = new Map();
	const other = [];
	for (const ev of thread.events) {
		// One entry a question, with what every entry of it says.
		const id = ev.type === 'question_resolved' && ((ev.data || {}).question_id || ev.seq);
		if (id) res.set(id, Object.assign({}, res.get(id) || ev, { data: Object.assign({}, (res.get(id) || {}).data, ev.data) }));
		else if (ev.type === 'aborted' || ev.type === 'run_finished' || ev.type === 'tool_output') other.push(ev);
	}
	const items = (thread.data.messages || []).map((m, i) => ({ t: ms(m.created_at) || 0, i, node: () => messageView(m) }));
	let i = items.length;
	for (const ev of [...res.values(), ...other]) items.push({ t: ms(ev.at) || 0, i: i++, node: () => eventView(ev) });
	return items.sort((a, b) => a.t - b.t || a.i - b.i);
}

function renderThread() {
	const body = $('thread-body');
	const list0 = body.querySelector('.msgs');
	const atEnd = !list0 || list0.scrollTop + list0.clientHeight >= list0.scrollHeight - 40;
	const refocus = holdFocus(body);
	const write = can('client');
	const th = thread.data;
	const running = th && th.status === 'running';
	// The forms are the page's own, so what is typed in them stays.
	$('thread-h').textContent = thread.mode === 'new' ? 'New thread' : 'Conversation';
	$('new-form').hidden = thread.mode !== 'new';
	$('compose-form').hidden = !write || thread.mode === 'new' || !thread.id;
	$('abort-open').hidden = !running;
	$('abort-form').hidden = thread.mode !== 'abort' || !running;
	for (const [id, e] of [['compose-error', thread.composeError], ['new-error', thread.newError]]) ($(id).hidden = !e), ($(id).textContent = e || '');
	if (thread.mode === 'new') return refocus();
	if (!thread.id) return body.append(el('p', { class: 'empty' }, 'Select a question or a thread of the History to see its conversation.'), write ? btn('New thread', '', openNewThread) : null);
	const state = th ? (th.run_state && th.run_state !== 'idle' ? th.run_state : th.status) : 'loading…';
	body.append(el('div', { class: 'thead' }, el('code', null, txt(thread.id)), el('span', { class: 'chip st-' + state }, STATES[state] || state)));
	if (th && th.run_state === 'failed') {
		body.append(el('p', { class: 'warning' }, 'The run stopped with an error: ', txt(th.run_error || 'unknown'), ' ', write ? btn('Retry the run', 'small', () => threadPost('/resume', undefined, 'Retrying the run.')) : null));
	}
	if (thread.error) body.append(alertP(thread.error));
	if (th) {
		const list = el('ol', { class: 'msgs' });
		for (const it of timeline()) {
			const n = it.node();
			if (n) list.append(n);
		}
		for (const c of th.open_calls || []) list.append(openCallView(c) || '');
		if (!list.childNodes.length) list.append(el('li', { class: 'empty' }, 'No messages yet.'));
		const pend = (th.pending_questions || []).sort((a, b) => numeric(a.id, b.id));
		if (pend.length) list.append(el('li', { class: 'msg event' }, el('span', null, 'waiting for answers: ', pend.map((pq, j) => [j ? ', ' : '', btn(txt(pq.id), 'link', () => pick(qKey(pq)), { 'data-key': qKey(pq) })]))));
		body.append(list);
		if (atEnd) requestAnimationFrame(() => (list.scrollTop = list.scrollHeight));
		const audit = el('details', { class: 'audit', open: thread.auditOpen, ontoggle: (e) => (thread.auditOpen = e.target.open) },
			el('summary', null, 'Audit log: ' + thread.events.length + ' entries'), el('ol', null, thread.events.map(auditLine)));
		body.append(audit);
		// A running call: look again (its end is an event, not its progress).
		clearTimeout(thread.poll);
		if ((th.open_calls || []).some((c) => c.state === 'running')) thread.poll = setTimeout(refreshThreadSoon, 2000);
	}
	refocus();
}

async function threadPost(suffix, body, doneText) {
	const r = await call('POST', '/v1/threads/' + enc(thread.id) + suffix, body);
	if (!r) return offline('the request was not sent', () => threadPost(suffix, body, doneText));
	if (r.ok) {
		thread.mode = 'view';
		$('abort-reason').value = '';
		thread.composeError = null;
		toast(doneText);
	} else thread.composeError = explain(r);
	renderThread();
	refreshThreadSoon();
}

let composeKey = null;
async function sendMessage() {
	const text = $('compose').value;
	if (!text.trim()) return;
	// One key per message: a retry does not start a second run.
	if (!composeKey || composeKey.text !== text || composeKey.thread !== thread.id) composeKey = { text, thread: thread.id, key: randomKey() };
	const r = await call('POST', '/v1/threads/' + enc(thread.id) + '/messages', { text }, { 'Idempotency-Key': composeKey.key });
	if (!r) return offline('your message was not sent', sendMessage);
	if (r.ok) {
		$('compose').value = '';
		composeKey = null;
		thread.composeError = null;
		toast('Message sent; the run has started.');
	} else thread.composeError = explain(r);
	renderThread();
	refreshThreadSoon();
}

function openNewThread() {
	thread.mode = 'new';
	renderThread();
	focus('new-text');
	$('thread').scrollIntoView({ block: 'nearest' });
}
$('new-form').addEventListener('submit', async (e) => {
	e.preventDefault();
	const text = $('new-text').value;
	const id = $('new-id').value.trim();
	if (!text.trim()) return (thread.newError = 'Write the first message.'), renderThread();
	const r = await call('POST', '/v1/threads', id ? { id } : {});
	thread.newError = !r ? 'The server cannot be reached. Nothing was created; try again.' : r.ok ? null : r.err && r.err.code === 'conflict' ? 'A thread with this id exists already: choose another id, or leave it empty.' : explain(r);
	if (thread.newError) return renderThread();
	$('new-id').value = $('new-text').value = '';
	Object.assign(thread, { mode: 'view', id: '', nextId: null });
	showThread(r.data.id);
	$('compose').value = text;
	await sendMessage();
});
$('new-cancel').addEventListener('click', () => {
	const back = thread.nextId || thread.id;
	Object.assign(thread, { mode: 'view', id: '', nextId: null });
	if (back) showThread(back);
	else renderThread();
});
$('compose-form').addEventListener('submit', (e) => (e.preventDefault(), sendMessage()));
onCtrlEnter($('compose'), sendMessage);
$('abort-open').addEventListener('click', () => ((thread.mode = thread.mode === 'abort' ? 'view' : 'abort'), renderThread(), focus('abort-reason')));
$('abort-cancel').addEventListener('click', () => ((thread.mode = 'view'), renderThread()));
$('abort-send').addEventListener('click', () => threadPost('/abort', { reason: $('abort-reason').value.trim() || 'aborted by the reviewer' }, 'Run aborted.'));
$('new-thread-top').addEventListener('click', openNewThread);

// ---------- keyboard ----------
const help = $('help');
$('help-btn').addEventListener('click', () => help.showModal());
D.addEventListener('keydown', (e) => {
	if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey || !S.started || !$('signin').hidden || help.open) return;
	const t = e.target;
	const typing = t && t.closest && t.closest('input, textarea, select, [contenteditable]');
	const q = shown.q;
	const k = q && qKey(q);
	if (e.key === 'Escape') {
		if (k && draft(k).mode !== 'view') {
			e.preventDefault();
			draft(k).armed = false;
			setMode(k, draft(k).mode === 'diff' ? 'edit' : 'view');
		} else if (k && draft(k).armed) {
			draft(k).armed = false;
			renderDetail();
		} else if (thread.mode !== 'view') {
			thread.mode = 'view';
			renderThread();
		}
		return;
	}
	if (typing) return;
	if (e.key === ' ' && t.classList.contains('qitem') && t.dataset.key) return e.preventDefault(), togglePick(t.dataset.key, e.shiftKey);
	// An answer key clicks the enabled button that names it; not on a
	// question just shown (a held key), while another item has the focus,
	// or to approve despite hidden characters (that takes a click).
	const click = (id) => {
		const b = $(id);
		if (b && !b.disabled && b.getAttribute('aria-keyshortcuts') === e.key && !(e.key === 'a' && draft(k).armed)) b.click();
	};
	const other = t.dataset && t.dataset.key && t.dataset.key !== sel;
	if ('ade'.includes(e.key) && (e.preventDefault(), e.repeat || other || performance.now() - (shown.at || 0) < 700)) return;
	const keys = { j: () => move(1), k: () => move(-1), a: () => click('act-approve'), d: () => click('act-deny'), e: () => click('act-edit'), '?': () => (e.preventDefault(), help.showModal()) };
	if (Object.hasOwn(keys, e.key)) keys[e.key]();
});

// Typed text is kept on the page; warn before a reload throws it away.
window.addEventListener('beforeunload', (e) => {
	const typed = [...drafts.values()].some((d) => (d.reason && d.reason.trim()) || (d.mode === 'edit' && d.edit)) || $('compose').value.trim();
	if (typed) e.preventDefault();
});

renderDetail();
boot();
