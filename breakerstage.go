package breakwater

import "net/http"

// BreakerStage asks bs for key(req)'s breaker before every request and
// reports each outcome as classified by cl (nil means [Classify]). Inside a
// [RetryStage] a failing attempt that will be retried is not charged: the
// retry stage charges the breaker once if the call gives up. A nil key is
// [HostKey]. As in a [Transport], an answer that is none (a nil response
// with a nil error, or a 101 Switching Protocols to a request that did not
// ask to upgrade, whose connection is closed) is a failure and an error.
func BreakerStage(bs *Breakers, key KeyFunc, cl Classifier) Stage {
	if key == nil {
		key = HostKey
	}
	return func(next http.RoundTripper) http.RoundTripper {
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			k, err := keyOf(key, req)
			if err != nil {
				if hasBody(req) {
					_ = req.Body.Close()
				}
				return nil, err
			}
			b, pin := bs.acquire(k) // kept in the registry until the outcome is recorded
			defer pin.Release()
			permit, err := b.Allow()
			if err != nil {
				if hasBody(req) {
					_ = req.Body.Close()
				}
				return nil, err
			}
			resp, err := next.RoundTrip(req)
			if err == nil {
				err = refuseBadAnswer(req, resp)
			}
			if err != nil {
				resp = nil
			}
			o := classifySafely(cl, resp, err)
			if m, ok := req.Context().Value(meltKey{}).(*meltSlot); ok && bs.cfg.judge(o.Category) == failure && !permit.probe() {
				m.defer_(permit, o)
			} else {
				permit.record(o)
			}
			if resp == nil {
				permit.release()
				return nil, err
			}
			track(req.Context(), resp, releaser{permit: permit})
			return resp, nil
		})
	}
}
