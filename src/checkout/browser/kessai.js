/*
 * kessai.js — the browser script of kessai (v2 §4.8), served by kessai at /v2/js/kessai.js. No
 * dependencies and no request but to the kessai that served it.
 *
 *   <script src="https://<kessai>/v2/js/kessai.js"></script>
 *   const kessai = Kessai('pk_test_…');
 *   const { paymentFlow, error } = await kessai.confirmPaymentFlow(clientSecret, {
 *     card: { number, exp_month, exp_year, cvc },   // tokenized with the public key; or
 *     payment_method_type: 'paypay',                // a wallet: the buyer approves on its page
 *     return_url: 'https://shop.example/return',
 *   });
 *
 * After a redirect (a wallet, a 3-D Secure challenge) and after any successful confirmation the
 * buyer lands on `return_url` with `payment_flow_id`, `payment_flow_client_secret` and
 * `redirect_status`; `kessai.retrievePaymentFlow(clientSecret)` reads the result there. A refused
 * confirmation (a declined card, a wrong client secret) resolves to `{ error }` and leaves the
 * buyer on the page.
 *
 * A setup flow (a card saved for later, nothing charged) is confirmed the same way with its own
 * client secret (`<setup flow id>_secret_<random>`):
 *
 *   const { setupFlow, error } = await kessai.confirmSetupFlow(clientSecret, { card, return_url });
 *
 * and the buyer lands on `return_url` with `setup_flow_id`, `setup_flow_client_secret` and
 * `redirect_status`; `kessai.retrieveSetupFlow(clientSecret)` reads the result there.
 */
(function () {
  'use strict';
  var current = document.currentScript;
  var scriptOrigin = current && current.src ? new URL(current.src).origin : window.location.origin;

  function KessaiError(status, title, detail, code) {
    var error = new Error(detail || title);
    error.name = 'KessaiError';
    error.status = status;
    error.title = title;
    error.code = code;
    return error;
  }

  /** The flow id a client secret belongs to (`<payment or setup flow id>_secret_<random>`). */
  function flowIdOf(clientSecret) {
    var at = typeof clientSecret === 'string' ? clientSecret.indexOf('_secret_') : -1;
    if (at <= 0) throw KessaiError(400, 'Invalid client secret', 'a client_secret reads <flow id>_secret_<…>');
    return clientSecret.slice(0, at);
  }

  function Kessai(publicKey, options) {
    if (typeof publicKey !== 'string' || publicKey.indexOf('pk_') !== 0) throw KessaiError(401, 'Unauthorized', 'Kessai() takes the public key (pk_…)');
    var base = (options && options.apiBase) || scriptOrigin;

    function v2(method, path, body) {
      var init = { method: method, headers: { Authorization: 'Bearer ' + publicKey } };
      if (body !== undefined) {
        init.headers['Content-Type'] = 'application/json';
        init.body = JSON.stringify(body);
      }
      return fetch(base + '/v2' + path, init).then(function (response) {
        return response.json().then(function (json) {
          if (!response.ok) throw KessaiError(response.status, json.title, json.detail, json.code);
          return json;
        });
      });
    }

    /** A card token (v1 POST /v1/tokens with the public key). */
    function createToken(card) {
      var form = new URLSearchParams();
      ['number', 'exp_month', 'exp_year', 'cvc', 'name'].forEach(function (field) {
        if (card[field] !== undefined && card[field] !== '') form.set('card[' + field + ']', String(card[field]));
      });
      return fetch(base + '/v1/tokens', {
        method: 'POST',
        headers: { Authorization: 'Basic ' + btoa(publicKey + ':'), 'Content-Type': 'application/x-www-form-urlencoded' },
        body: form.toString(),
      }).then(function (response) {
        return response.json().then(function (json) {
          if (!response.ok) throw KessaiError(response.status, json.error && json.error.type, json.error && json.error.message, json.error && json.error.code);
          return json;
        });
      });
    }

    /** `kind` is the flow's: 'payment_flow' or 'setup_flow' (its API path and hand-over fields). */
    function retrieveFlow(kind, clientSecret) {
      var id = flowIdOf(clientSecret);
      return v2('GET', '/' + kind + 's/' + encodeURIComponent(id) + '?client_secret=' + encodeURIComponent(clientSecret));
    }

    function retrievePaymentFlow(clientSecret) {
      return retrieveFlow('payment_flow', clientSecret);
    }

    function retrieveSetupFlow(clientSecret) {
      return retrieveFlow('setup_flow', clientSecret);
    }

    /** A kessai page of the browser script (3-D Secure challenge, wallet) for this flow. */
    function redirectPage(path, kind, clientSecret, returnUrl, extra) {
      var url = new URL(base + path);
      url.searchParams.set('key', publicKey);
      url.searchParams.set(kind + '_id', flowIdOf(clientSecret));
      url.searchParams.set('client_secret', clientSecret);
      url.searchParams.set('return_url', returnUrl);
      Object.keys(extra || {}).forEach(function (name) {
        url.searchParams.set(name, extra[name]);
      });
      return url.toString();
    }

    function returnTo(kind, returnUrl, flow, clientSecret) {
      var url = new URL(returnUrl, window.location.href);
      url.searchParams.set(kind + '_id', flow.id);
      url.searchParams.set(kind + '_client_secret', clientSecret);
      url.searchParams.set('redirect_status', flow.status === 'succeeded' || flow.status === 'requires_capture' ? 'succeeded' : 'failed');
      return url.toString();
    }

    /**
     * Confirms the flow of `clientSecret` with `params`: `card` (tokenized here) or
     * `payment_method` (`tok_…`, `pm_…`), or `payment_method_type` `paypay` / `apple_pay`;
     * `return_url` (required). Resolves `{ error }` on a refusal; otherwise the buyer is sent on
     * (wallet, challenge, or `return_url`) and it resolves `{ paymentFlow }` as they leave.
     */
    function go(url) {
      window.location.assign(url);
    }

    /**
     * Confirms the flow of `kind` ('payment_flow' or 'setup_flow') with a card (tokenized here) or
     * `payment_method`; `extra` goes into the confirm body. A 3-D Secure challenge sends the buyer
     * to its page, anything else to `return_url`; resolves the flow as they leave.
     */
    function confirmCard(kind, clientSecret, params, extra) {
      var returnUrl = params.return_url;
      var method = params.card ? createToken(params.card).then(function (token) { return token.id; }) : Promise.resolve(params.payment_method);
      return method
        .then(function (paymentMethod) {
          var body = Object.assign({ client_secret: clientSecret, return_url: returnUrl }, extra);
          if (paymentMethod !== undefined) body.payment_method_id = paymentMethod;
          return v2('POST', '/' + kind + 's/' + encodeURIComponent(flowIdOf(clientSecret)) + '/confirm', body);
        })
        .then(function (flow) {
          if (flow.status === 'requires_action') go(redirectPage('/v2/js/three_d_secure', kind, clientSecret, new URL(returnUrl, window.location.href).toString()));
          else go(returnTo(kind, returnUrl, flow, clientSecret));
          return flow;
        });
    }

    /** The checks every confirmation makes first, then `run`; a refusal resolves `{ error }`. */
    function confirming(clientSecret, params, run) {
      return Promise.resolve()
        .then(function () {
          if (!params || typeof params.return_url !== 'string' || params.return_url === '') throw KessaiError(422, 'Validation Error', 'return_url is required');
          flowIdOf(clientSecret);
          return run();
        })
        .catch(function (error) {
          return { error: error };
        });
    }

    function confirmPaymentFlow(clientSecret, params) {
      var type = (params && params.payment_method_type) || 'card';
      return confirming(clientSecret, params, function () {
        if (type === 'paypay' || type === 'apple_pay') {
          // A wallet: the flow must be this key's and secret's before the buyer leaves.
          return retrievePaymentFlow(clientSecret).then(function (flow) {
            go(redirectPage('/v2/js/wallet', 'payment_flow', clientSecret, new URL(params.return_url, window.location.href).toString(), { method: type }));
            return { paymentFlow: flow };
          });
        }
        return confirmCard('payment_flow', clientSecret, params, { payment_method_type: type }).then(function (flow) {
          return { paymentFlow: flow };
        });
      });
    }

    /**
     * Confirms the setup flow of `clientSecret` with `card` (tokenized here) or `payment_method`,
     * and `return_url` (required): the card is verified (a 3-D Secure challenge when the card asks)
     * and saved to the flow's customer; nothing is charged. Resolves `{ error }` on a refusal (a
     * declined card), else `{ setupFlow }` as the buyer leaves for the challenge or `return_url`.
     */
    function confirmSetupFlow(clientSecret, params) {
      return confirming(clientSecret, params, function () {
        return confirmCard('setup_flow', clientSecret, params, {}).then(function (flow) {
          return { setupFlow: flow };
        });
      });
    }

    /** The hand-over on `return_url`: the flow id and client secret in the query, if any. */
    function returnedFlow(search) {
      var query = new URLSearchParams(search === undefined ? window.location.search : search);
      var setupId = query.get('setup_flow_id');
      var secret = query.get(setupId ? 'setup_flow_client_secret' : 'payment_flow_client_secret');
      var found = { clientSecret: secret, redirectStatus: query.get('redirect_status') };
      if (setupId) found.setupFlowId = setupId;
      else found.paymentFlowId = query.get('payment_flow_id');
      return (found.setupFlowId || found.paymentFlowId) && secret ? found : null;
    }

    return {
      createToken: createToken,
      retrievePaymentFlow: retrievePaymentFlow,
      confirmPaymentFlow: confirmPaymentFlow,
      retrieveSetupFlow: retrieveSetupFlow,
      confirmSetupFlow: confirmSetupFlow,
      returnedFlow: returnedFlow,
    };
  }

  window.Kessai = Kessai;
})();
