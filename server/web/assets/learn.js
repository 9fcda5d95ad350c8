// "Approve, and allow calls like this" (issue 25), apart from the page's
// own script: a button on an approval's actions opens the narrowest rule
// that covers the call, each argument's match to widen or narrow, where it
// applies, its blast radius and the rule as policy YAML; saving approves
// the call and learns the rule. "Rules" in the header lists the learned
// rules to approve (as a second reviewer) or revoke. Data is shown as text
// only; invisible and direction-changing characters as ⟨U+…⟩.
const D = document;
const $ = (id) => D.getElementById(id);
const SPECIAL = /[\0-\x08\x0B-\x1F\x7F-\x9F\xAD\u061C\u180E\u200B-\u200F\u2028-\u202E\u2060-\u206F\uFEFF]/g;
const vis = (s) => String(s ?? '').replace(SPECIAL, (c) => '⟨U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '⟩');
function el(tag, props, ...kids) {
	const n = D.createElement(tag);
	for (const [k, v] of Object.entries(props || {})) {
		if (v == null || v === false) continue;
		if (k.startsWith('on')) n.addEventListener(k.slice(2), v);
		else if (k in n && k !== 'list') n[k] = v;
		else n.setAttribute(k, v);
	}
	for (const c of kids.flat(Infinity)) if (c != null && c !== false) n.append(c instanceof Node ? c : vis(c));
	return n;
}
const S = { csrf: '', me: null, q: null, p: null, busy: false };
async function api(method, path, body) {
	const headers = {};
	if (body !== undefined) headers['Content-Type'] = 'application/json';
	if (method !== 'GET') headers['X-CSRF-Token'] = S.csrf;
	try {
		const res = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
		const text = await res.text();
		let data = null;
		try {
			data = JSON.parse(text);
		} catch {
			data = text;
		}
		return { ok: res.ok, status: res.status, data };
	} catch {
		return { ok: false, status: 0, data: { error: { message: 'the server cannot be reached' } } };
	}
}
const why = (r) => (r.data && r.data.error ? r.data.error.message : 'the server said ' + r.status);
// session: whether who is signed in reviews, on a server that learns
// rules (one that does not answers 404 learning_off).
async function session() {
	const r = await api('GET', '/v1/session');
	S.me = r.ok ? r.data : null;
	S.csrf = (S.me && S.me.csrf_token) || '';
	return !!S.me && (S.me.dev_mode || S.me.role === 'reviewer' || S.me.role === 'admin') && (await api('GET', '/v1/rules?status=active')).ok;
}
const enc = encodeURIComponent;
const qPath = (q) => '/v1/questions/' + enc(q.thread_id) + '/' + enc(q.id);

// The question shown: the address says it (q=THREAD/ID).
function shownKey() {
	const m = /^([^/]*)\/(.*)$/.exec(new URLSearchParams(location.hash.slice(1)).get('q') || '');
	return m && [m[1], m[2]];
}
let checking = false;
const seen = { key: '', q: null };
async function offer() {
	const pane = $('question');
	const k = shownKey();
	const approve = $('act-approve');
	if (!pane || !k || checking || !approve || pane.querySelector('#learn-open')) return;
	checking = true;
	try {
		if (seen.key !== k.join('/')) {
			if (S.on === undefined) S.on = await session();
			if (!S.on) return;
			const r = await api('GET', '/v1/questions/' + enc(k[0]) + '/' + enc(k[1]));
			seen.key = k.join('/');
			seen.q = r.ok ? r.data : null;
		}
		const q = seen.q;
		const bar = ($('act-approve') || {}).parentElement;
		if (!q || q.kind !== 'approve' || q.status !== 'pending' || !bar || pane.querySelector('#learn-open')) return;
		bar.append(el('button', { type: 'button', id: 'learn-open', class: 'btn', disabled: $('act-approve').disabled,
			title: 'Approve, and allow calls like this: learn a rule', onclick: () => propose(q) }, 'Approve + allow like this…'));
	} finally {
		checking = false;
	}
}

// ---- the proposal ----
function dialog(id, title) {
	let d = $(id);
	if (!d) {
		// Keys typed here are not the page's shortcuts: an "a" in this
		// dialog must not approve the question behind it.
		d = el('dialog', { id, class: 'learn', 'aria-labelledby': id + '-h', onkeydown: (e) => e.stopPropagation() });
		D.body.append(d);
	}
	d.replaceChildren(el('h2', { id: id + '-h' }, title));
	return d;
}
async function propose(q, body) {
	S.q = q;
	const r = await api('POST', qPath(q) + '/proposal', body || {});
	const d = dialog('learn-dlg', 'Approve, and allow calls like this');
	if (!d.open) d.showModal();
	if (!r.ok) {
		d.append(el('p', { class: 'error-text', role: 'alert', id: 'learn-error' }, 'No rule: ' + why(r)), closeBtn(d));
		return;
	}
	S.p = r.data;
	render(d);
}
function closeBtn(d) {
	return el('div', { class: 'actions' }, el('button', { type: 'button', class: 'btn', id: 'learn-close', onclick: () => d.close() }, 'Close'));
}
const opt = (value, label, cur) => el('option', { value, selected: value === cur }, label);
const scopeText = (s) => (s.kind === 'thread' ? 'thread ' + s.key : s.kind === 'dir' ? 'project ' + s.key : 'everyone');
function render(d) {
	const p = S.p;
	const sh = p.spec.shell;
	const rule = el('div', { class: 'learn-rule' });
	if (sh)
		sh.commands.forEach((c, ci) => {
			const row = el('div', { class: 'learn-cmd' }, ci ? el('b', null, sh.ops[ci - 1]) : null, (c.env || []).map((e) => el('code', null, e)), el('code', null, c.name));
			(c.args || []).forEach((a, ai) => {
				const ch = p.choices[ci][ai];
				const w = (a.prefix || '') + a.word;
				if (ch.length < 2) return row.append(el('code', null, w));
				const s = el('select', { 'aria-label': a.role + ' ' + vis(w), 'data-arg': ci + '.' + ai, onchange: () => ((a.match = s.value), update()) },
					ch.map((m) => opt(m, m === 'exact' ? vis(w) : (a.prefix || '') + '‹' + (m === 'any' ? 'any word' : 'a path inside') + '›', a.match)));
				row.append(s);
			});
			for (const x of c.redirects || []) row.append(el('code', null, (x.fd || '') + x.op + x.word));
			rule.append(row);
		});
	for (const f of p.spec.args || []) {
		const fc = p.fields[f.name] || { matches: ['exact'] };
		const row = el('div', { class: 'learn-cmd' }, el('code', null, f.name));
		const s = el('select', { 'aria-label': 'argument ' + vis(f.name), 'data-arg': f.name }, fc.matches.map((m) => opt(m, m === 'exact' ? '= ' + vis(f.value) : m, f.match)));
		row.append(s);
		if (f.match === 'inside') row.append(el('select', { 'aria-label': 'directory', onchange: (e) => ((f.dir = e.target.value), update()) }, fc.dirs.map((x) => opt(x, x, f.dir))));
		if (f.match === 'range')
			for (const b of ['min', 'max']) row.append(el('input', { type: 'number', 'aria-label': b, value: f[b], onchange: (e) => ((f[b] = Number(e.target.value)), update()) }));
		s.onchange = () => {
			f.match = s.value;
			delete f.min, delete f.max, delete f.dir;
			const v = Number(f.value);
			if (f.match === 'range') f.min = f.max = v;
			if (f.match === 'inside') f.dir = fc.dirs[0];
			update();
		};
		rule.append(row);
	}
	const scope = el('select', { id: 'learn-scope', onchange: () => ((p.scope = p.scopes[scope.selectedIndex]), update()) }, p.scopes.map((s, i) => el('option', { value: i, selected: scopeText(s) === scopeText(p.scope) }, scopeText(s))));
	const expires = el('select', { id: 'learn-expires' }, [['never', 'until revoked'], ['1d', 'for a day'], ['7d', 'for a week'], ['30d', 'for 30 days']].map(([v, l]) => opt(v, l, S.expires || 'never')));
	expires.onchange = () => (S.expires = expires.value);
	const r = p.radius;
	d.append(...[
		el('p', { class: 'muted' }, 'The narrowest rule that covers ', el('code', null, (sh && sh.from) || p.spec.tool), '. Widen or narrow each part; the rule never allows more commands, options or operators than these.'),
		rule,
		el('p', { id: 'learn-summary' }, 'Allows: ', el('code', null, p.summary)),
		el('p', { class: 'learn-where' }, el('label', null, 'Applies to ', scope), ' ', el('label', null, 'lasts ', expires)),
		el('div', { id: 'learn-radius', class: 'learn-radius' },
			el('p', null, 'Blast radius: of the last ', String(r.scanned), ' questions about ', p.spec.tool, ', it would have allowed ', el('strong', { id: 'learn-matched' }, String(r.matched)), ` (${r.approved} approved, ${r.denied.length} denied, ${r.edited.length} edited, ${r.unanswered} unanswered).`),
			r.denied.length ? el('ul', { class: 'learn-flags' }, r.denied.map((x) => el('li', null, '⚑ denied by ', x.by, x.reason ? ' (' + x.reason + ')' : '', ' — ', el('code', null, x.call)))) : null,
			r.edited.length ? el('ul', null, r.edited.map((x) => el('li', null, '✎ edited by ', x.by, ' — ', el('code', null, x.call)))) : null,
			r.unseen.length ? el('p', { class: 'muted' }, 'Never asked, it would also allow: ', r.unseen.map((u, i) => [i ? ', ' : '', el('code', null, u)])) : null),
		p.second_reviewer ? el('p', { class: 'notice' }, 'This policy wants a second reviewer: the rule allows nothing until another reviewer approves it.') : null,
		el('details', null, el('summary', null, 'As a policy rule (YAML)'), el('pre', { id: 'learn-yaml' }, p.yaml)),
		el('p', { class: 'error-text', role: 'alert', id: 'learn-error', hidden: true }),
		el('div', { class: 'actions' },
			el('button', { type: 'button', class: 'btn primary', id: 'learn-save', onclick: save }, 'Approve and save the rule'),
			el('button', { type: 'button', class: 'btn', onclick: () => d.close() }, 'Cancel'))].filter(Boolean));
}
function fail(msg) {
	const e = $('learn-error') || $('learn-dlg').appendChild(el('p', { class: 'error-text', role: 'alert', id: 'learn-error' }));
	e.hidden = false;
	e.textContent = vis(msg);
}
async function update() {
	const p = S.p;
	const r = await api('POST', qPath(S.q) + '/proposal', { spec: p.spec, scope: p.scope });
	if (!r.ok) return fail('Not this rule: ' + why(r));
	S.p = r.data;
	try {
		render(dialog('learn-dlg', 'Approve, and allow calls like this'));
	} catch (e) {
		fail('The page failed: ' + e.message);
	}
}
async function save() {
	if (S.busy) return;
	S.busy = true;
	const p = S.p;
	const r = await api('POST', qPath(S.q) + '/learn', { digest: S.q.digest, spec: p.spec, scope: p.scope, expires: S.expires || 'never' });
	S.busy = false;
	if (!r.ok) return fail('Not saved: ' + why(r));
	const rule = r.data.rule;
	const d = dialog('learn-dlg', 'Approved, and rule learned');
	d.append(el('p', { role: 'status', id: 'learn-done' }, 'Rule ', el('code', null, rule.id), ' (', rule.status, ') allows ', el('code', null, rule.summary), ' for ', rule.scope_text, '.'), closeBtn(d));
}

// ---- the rules ----
async function rules() {
	const d = dialog('learn-rules', 'Rules learned from answers');
	if (!d.open) d.showModal();
	const r = await api('GET', '/v1/rules?status=all');
	if (!r.ok) return d.append(el('p', { class: 'error-text', role: 'alert' }, why(r)), closeBtn(d));
	const reason = el('input', { type: 'text', id: 'learn-reason', placeholder: 'why, for the audit log' });
	const change = async (rule, verb) => {
		const res = await api('POST', '/v1/rules/' + enc(rule.id) + '/' + verb, verb === 'revoke' ? { reason: reason.value } : {});
		if (!res.ok) return d.append(el('p', { class: 'error-text', role: 'alert' }, why(res)));
		rules();
	};
	const rows = r.data.rules.map((x) =>
		el('tr', { 'data-rule': x.id },
			el('td', null, el('code', null, x.id)), el('td', { class: 'learn-status' }, x.status), el('td', null, el('code', null, x.summary)), el('td', null, x.scope_text), el('td', null, x.created_by),
			el('td', null,
				x.status === 'waiting' && S.me && x.created_by !== S.me.name ? el('button', { type: 'button', class: 'btn small', onclick: () => change(x, 'approve') }, 'Approve') : null,
				x.status !== 'revoked' ? el('button', { type: 'button', class: 'btn small deny', onclick: () => change(x, 'revoke') }, 'Revoke') : null)));
	d.append(
		rows.length ? el('table', { class: 'learn-table' }, el('tr', null, ['Rule', 'Status', 'Allows', 'Where', 'By', ''].map((h) => el('th', null, h))), rows) : el('p', { class: 'empty' }, 'No rule was learned yet.'),
		el('label', null, 'Reason to revoke ', reason),
		closeBtn(d));
}

async function start() {
	const top = D.querySelector('header.top');
	const help = $('help-btn');
	if (top && !$('learn-rules-btn')) top.insertBefore(el('button', { type: 'button', class: 'btn small', id: 'learn-rules-btn', hidden: true, onclick: rules }, 'Rules'), help);
	let signedIn = false;
	new MutationObserver(() => {
		offer();
		// Once a sign-in shows the app: the button for who may review.
		const app = !$('app').hidden;
		if (app && !signedIn) session().then((ok) => ($('learn-rules-btn').hidden = !(S.on = ok)));
		signedIn = app;
	}).observe(D.body, { childList: true, subtree: true, attributes: true, attributeFilter: ['hidden'] });
	addEventListener('hashchange', offer);
}
start();
