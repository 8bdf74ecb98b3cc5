package policy_test

import (
	"fmt"

	"github.com/throttlekit/throttlekit-server/policy"
)

func Example() {
	set, err := policy.Parse(map[string][]byte{"messaging.yaml": []byte(`
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      name: per_number
      requests_per_unit: 100
      period: 12h
      algorithm: gcra
      burst: 10
`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := []policy.Entry{{Key: "message_type", Value: "marketing"}, {Key: "to_number", Value: "2061111111"}}
	r := set.Match("messaging", req)
	fmt.Println(r)
	fmt.Println(string(r.AppendKey(nil, req)))
	fmt.Println(r.MetricKey(req))

	named, _ := set.Lookup("messaging", "per_number")
	fmt.Println(named, named.Limit.Period)
	// Output:
	// messaging message_type_marketing.to_number 5 per day fixed
	// rls:messaging:message_type=marketing:to_number=2061111111#fixed:24h0m0s
	// message_type_marketing.to_number
	// messaging to_number name=per_number 100 per 12h0m0s gcra burst=10 43200000000000
}
