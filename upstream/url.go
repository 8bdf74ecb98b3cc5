package upstream

import (
	"errors"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrURL is wrapped by the errors Dial returns for a URL it cannot use.
var ErrURL = errors.New("upstream: bad URL")

// parseURL reads the upstream URL: it returns single-server options, or
// cluster options when the scheme is redis-cluster or rediss-cluster.
func parseURL(raw string) (*redis.Options, *redis.ClusterOptions, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, errors.Join(ErrURL, err)
	}
	switch u.Scheme {
	case "redis", "rediss":
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, nil, errors.Join(ErrURL, err)
		}
		return o, nil, nil
	case "redis-cluster", "rediss-cluster":
	default:
		return nil, nil, errors.Join(ErrURL, errors.New("scheme must be redis, rediss, redis-cluster or rediss-cluster: "+raw))
	}
	if u.Path != "" && u.Path != "/" {
		return nil, nil, errors.Join(ErrURL, errors.New("a cluster has no database number: "+raw))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, nil, errors.Join(ErrURL, errors.New("a cluster URL takes no query: "+raw))
	}
	hosts := strings.Split(u.Host, ",")
	for _, h := range hosts {
		if h == "" || !strings.Contains(h, ":") {
			return nil, nil, errors.Join(ErrURL, errors.New("each seed must be host:port: "+raw))
		}
	}
	// go-redis's own cluster URL form: the first seed as host, the others
	// as addr parameters; it reads user, password and TLS (rediss).
	v := url.URL{Scheme: strings.TrimSuffix(u.Scheme, "-cluster"), User: u.User, Host: hosts[0]}
	q := url.Values{}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	v.RawQuery = q.Encode()
	o, err := redis.ParseClusterURL(v.String())
	if err != nil {
		return nil, nil, errors.Join(ErrURL, err)
	}
	return nil, o, nil
}
