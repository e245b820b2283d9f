/*
 * The hosted checkout page's glue (served at /v2/js/checkout.js after kessai.js): the card form and
 * the wallet buttons confirm the session's payment flow (or, on a setup session's page, the card
 * form confirms its setup flow: `data-flow="setup_flow"`) through the browser script, with the
 * public key and the flow's client secret the page carries; the buyer comes back to the page's
 * return address, which completes the session and sends them to the shop's success URL.
 */
(function () {
  'use strict';
  var root = document.getElementById('checkout');
  if (!root) return;
  var kessai = window.Kessai(root.dataset.publicKey);
  var clientSecret = root.dataset.clientSecret;
  var returnUrl = root.dataset.returnUrl;
  var setup = root.dataset.flow === 'setup_flow';
  var message = document.getElementById('message');
  var buttons = Array.prototype.slice.call(root.querySelectorAll('button'));

  function busy(on) {
    buttons.forEach(function (button) {
      button.disabled = on;
    });
    root.setAttribute('aria-busy', on ? 'true' : 'false');
  }

  function show(text) {
    message.textContent = text;
  }

  function confirm(params) {
    busy(true);
    show('');
    var confirmFlow = setup ? kessai.confirmSetupFlow : kessai.confirmPaymentFlow;
    return confirmFlow(clientSecret, Object.assign({ return_url: returnUrl }, params)).then(function (result) {
      if (result.error) {
        busy(false);
        show(result.error.message || (setup ? 'The card could not be saved.' : 'The payment failed.'));
        var number = document.getElementById('card-number');
        if (number) number.focus();
      }
    });
  }

  var form = document.getElementById('card-form');
  if (form) {
    form.addEventListener('submit', function (event) {
      event.preventDefault();
      var value = function (id) {
        return document.getElementById(id).value.replace(/\s+/g, '');
      };
      confirm({ card: { number: value('card-number'), exp_month: value('card-exp-month'), exp_year: value('card-exp-year'), cvc: value('card-cvc') } });
    });
  }
  Array.prototype.forEach.call(root.querySelectorAll('button[data-method]'), function (button) {
    button.addEventListener('click', function () {
      confirm({ payment_method_type: button.dataset.method });
    });
  });
})();
