// The re-drive action of a dead transaction: asks who and why, then POST /v1/admin/transactions/redrive.
// The service records it in the round as a TransactionRedriven event and sends the transaction to the
// wallet again, with the same transactionId and body.
import { ApiError, postJson } from './api.js';
import { announce, h, notice } from './dom.js';

let formCount = 0;

/**
 * @typedef {{ operatorId: string, providerId: string, roundId: string, transactionId: string }} RedriveTarget
 */

/**
 * A "Re-drive" button that opens a small form in `host` (its next sibling region).
 * @param {RedriveTarget} target
 * @param {{ onDone?: () => void, signal?: AbortSignal }} [options]
 */
export function redriveControl(target, options = {}) {
  const id = `redrive-${++formCount}`;
  const host = h('div', { class: 'redrive-host', id: `${id}-host` });
  const button = h('button', { type: 'button', class: 'danger', 'aria-expanded': 'false', 'aria-controls': `${id}-host`, 'data-redrive': target.transactionId }, 'Re-drive');
  button.addEventListener('click', () => {
    if (host.firstChild) {
      close();
      return;
    }
    open();
  });

  function close() {
    host.replaceChildren();
    button.setAttribute('aria-expanded', 'false');
    button.focus();
  }

  function open() {
    button.setAttribute('aria-expanded', 'true');
    const by = h('input', { id: `${id}-by`, name: 'by', type: 'text', required: true, maxlength: '200', autocomplete: 'name' });
    const reason = h('textarea', { id: `${id}-reason`, name: 'reason', required: true, maxlength: '1000', rows: '2' });
    const status = h('div', { class: 'redrive-status' });
    const submit = h('button', { type: 'submit', class: 'danger' }, 'Re-drive now');
    const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
    cancel.addEventListener('click', close);
    const form = h(
      'form',
      { class: 'redrive-form', 'aria-label': `Re-drive ${target.transactionId}` },
      h(
        'fieldset',
        {},
        h('legend', {}, 'Re-drive ', h('code', {}, target.transactionId)),
        h('p', { class: 'muted' }, 'Sends this dead transaction to the wallet again, with the same transactionId and body. The re-drive, with who and why, is recorded in the round.'),
        h('p', { class: 'warning' }, 'If this money was already paid another way (an adjustment), do not re-drive it: the player would be paid twice.'),
        h('div', { class: 'field' }, h('label', { for: by.id }, 'Who re-drives it'), by),
        h('div', { class: 'field' }, h('label', { for: reason.id }, 'Why'), reason),
        h('div', { class: 'inline' }, submit, cancel),
        status,
      ),
    );
    form.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') close();
    });
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      if (!by.value.trim() || !reason.value.trim()) {
        status.replaceChildren(notice('Say who re-drives it and why.', 'error'));
        return;
      }
      submit.disabled = true;
      status.replaceChildren(notice('Re-driving…'));
      try {
        const { operatorId, providerId, roundId, transactionId } = target;
        await postJson('/v1/admin/transactions/redrive', { operatorId, providerId, roundId, transactionId, by: by.value.trim(), reason: reason.value.trim() }, { signal: options.signal });
        status.replaceChildren(notice(`Re-driven: ${target.transactionId} is being sent to the wallet again.`, 'ok'));
        announce(`Re-driven ${target.transactionId}.`);
        button.disabled = true;
        button.textContent = 'Re-driven';
        options.onDone?.();
      } catch (err) {
        submit.disabled = false;
        const text = err instanceof ApiError ? `Refused (${err.status}): ${err.message}` : `Could not re-drive: ${err instanceof Error ? err.message : String(err)}`;
        status.replaceChildren(notice(text, 'error'));
      }
    });
    host.replaceChildren(form);
    by.focus();
  }

  return { button, host };
}
